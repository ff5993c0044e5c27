"""A tiny "model" for tests/e2e/test_python.py: its forward pass asks the
simulated CUDA runtime for device memory, as PyTorch's caching allocator does
on a miss.  Lines tagged `# @name` are found by the test, which asserts the
exact file:line:function chain of each allocation."""
import ctypes
import os


class Runtime:
    """The simulated libcudart, loaded with ctypes.PyDLL (the GIL stays held
    during calls, like a C extension's forward pass) or ctypes.CDLL (the GIL
    is released around each call)."""

    def __init__(self, build, hold_gil=True):
        path = os.path.join(build, "sim", "libcudart.so.13")
        loader = ctypes.PyDLL if hold_gil else ctypes.CDLL
        self.lib = loader(path)
        self.lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.c_size_t]
        self.lib.cudaMalloc.restype = ctypes.c_int
        self.lib.cudaFree.argtypes = [ctypes.c_void_p]
        self.lib.cudaFree.restype = ctypes.c_int

    def malloc(self, size):
        ptr = ctypes.c_void_p()
        err = self.lib.cudaMalloc(ctypes.byref(ptr), size)  # @malloc
        if err != 0:
            raise MemoryError(f"cudaMalloc({size}) failed with error {err}")
        return ptr.value

    def free(self, ptr):
        return self.lib.cudaFree(ptr)


class Model:
    def __init__(self, runtime):
        self.runtime = runtime
        self.buffers = []

    def forward(self, size):
        self.buffers.append(self.runtime.malloc(size))  # @forward
        return self.buffers[-1]

    def forward_twice(self, size):
        self.buffers.append(self.runtime.malloc(size))  # @twice_a
        self.buffers.append(self.runtime.malloc(size))  # @twice_b
