"""Allocates device memory from Python for tests/e2e/test_python.py.

    python3 train.py BUILD SCENARIO

Each scenario allocates with its own distinctive size (SIZES) so the test can
find that allocation's stack in the snapshot.  Lines tagged `# @name` are
located by the test; keep one call per tagged line."""
import ctypes
import gc
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Model, Runtime  # noqa: E402

MiB = 1 << 20
SIZES = {
    "pydll": 3 * MiB + 4096,
    "cdll": 5 * MiB + 4096,
    "thread": 7 * MiB + 4096,
    "generator": 9 * MiB + 4096,
    "coroutine": 11 * MiB + 4096,
    "lines": 13 * MiB + 4096,
    "gc": 15 * MiB + 4096,
    "recursion": 17 * MiB + 4096,
    "nogil_many": 19 * MiB + 4096,
    "reused": 21 * MiB + 4096,
}
REPEAT = 3  # allocations per scenario, all from the same place


def step(model, size):
    return model.forward(size)  # @step


def train(model, size):
    for _ in range(REPEAT):
        step(model, size)  # @train


def worker(model, size):
    train(model, size)  # @worker


def batches(model, size):
    for _ in range(REPEAT):
        yield model.forward(size)  # @batches


async def fetch(model, size):
    return model.forward(size)  # @fetch


async def load(model, size):
    for _ in range(REPEAT):
        await fetch(model, size)  # @load


def deep(model, size, n):
    if n == 0:
        return model.forward(size)  # @deep_leaf
    return deep(model, size, n - 1)  # @deep


def native_frames_in_this_library():
    """True if the calling C stack runs inside libcumemtrace.so: used from a
    gc callback to prove no collection runs inside a wrapper."""
    libc = ctypes.PyDLL(None)
    buf = (ctypes.c_void_p * 128)()
    n = libc.backtrace(buf, 128)

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
    for addr in buf[:n]:
        info = DlInfo()
        if libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) and \
                info.fname and b"libcumemtrace" in info.fname:
            return True
    return False


NOGIL_ALLOCS = 400
REUSED = 50


def churn(runtime, size, n):
    if n:
        return churn(runtime, size, n - 1)
    runtime.free(runtime.malloc(size))


def main(build, scenario):
    size = SIZES[scenario]
    model = Model(Runtime(build, hold_gil=scenario not in ("cdll", "nogil_many",
                                                           "reused")))
    if scenario in ("pydll", "cdll"):
        train(model, size)  # @main_train
    elif scenario == "thread":
        t = threading.Thread(target=worker, args=(model, size), name="alloc")
        t.start()
        t.join()
    elif scenario == "generator":
        for _ in batches(model, size):  # @main_batches
            pass
    elif scenario == "coroutine":
        coro = load(model, size)
        try:
            coro.send(None)  # @main_coroutine
        except StopIteration:
            pass
    elif scenario == "lines":
        model.forward_twice(size)  # @main_lines
    elif scenario == "gc":
        # A collection at every allocation of a tracked object: if capturing
        # Python frames ran one (3.11 creates frame objects), the callback
        # would see libcumemtrace on the C stack.
        seen = []
        native_frames_in_this_library()  # resolve the libc symbols first
        gc.callbacks.append(
            lambda phase, info: phase == "start" and
            native_frames_in_this_library() and seen.append(info))
        gc.set_threshold(1)
        for _ in range(20):
            deep(model, size, 30)
        gc.set_threshold(700)
        gc.callbacks.clear()
        print(f"collections inside cumemtrace: {len(seen)}")
    elif scenario == "nogil_many":
        # Without the GIL, every capture still has its frames (python_nogil.c)
        for _ in range(NOGIL_ALLOCS):
            churn(model.runtime, size, 30)
    elif scenario == "reused":
        # Code objects that die after allocating without the GIL, the next
        # one often at the same address: each allocation must still name
        # its own line (python_table.c keys such entries by identity).
        addresses = set()
        reused = 0
        for i in range(REUSED):
            src = "\n" * i + "def f(rt, size):\n    rt.free(rt.malloc(size))\n"
            ns = {}
            exec(compile(src, "<generated>", "exec"), ns)
            reused += id(ns["f"].__code__) in addresses
            addresses.add(id(ns["f"].__code__))
            ns["f"](model.runtime, size)
            ns.clear()
            del ns
            gc.collect()
        print(f"code addresses reused: {reused}")
    elif scenario == "recursion":
        # deeper than a stored stack holds (RECORD_MAX_DEPTH = 256)
        sys.setrecursionlimit(1000)
        deep(model, size, 300)  # @main_recursion
    else:
        sys.exit(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])  # @module
