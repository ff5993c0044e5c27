"""ctypes access to the public API of libcumemtrace.so (include/cumemtrace.h).

The library is found in the process (dlsym on the global scope), never
loaded here: it only traces what it sees from the start, so loading it late
would measure nothing.
"""
import ctypes
import os
import shutil

MAX_DEVICES = 64  # ordinals 0..63 (record.h RECORD_MAX_DEVICES)


class Usage(ctypes.Structure):
    """struct cumemtrace_usage."""
    _fields_ = [
        ("current_bytes", ctypes.c_uint64),
        ("mark_bytes", ctypes.c_uint64),
        ("peak_bytes", ctypes.c_uint64),
        ("mark_time_ns", ctypes.c_int64),
        ("peak_time_ns", ctypes.c_int64),
    ]


class Library:
    """The preloaded library's mark API."""

    def __init__(self, process):
        self._begin = process.cumemtrace_mark_begin
        self._begin.restype = ctypes.c_int
        self._begin.argtypes = []
        self._end = process.cumemtrace_mark_end
        self._end.restype = ctypes.c_int
        self._end.argtypes = [ctypes.c_int]
        self._usage = process.cumemtrace_usage
        self._usage.restype = ctypes.c_int
        self._usage.argtypes = [ctypes.c_int, ctypes.POINTER(Usage)]
        self._dump = process.cumemtrace_dump
        self._dump.restype = ctypes.c_int
        self._dump.argtypes = [ctypes.c_char_p]
        version = process.cumemtrace_version
        version.restype = ctypes.c_char_p
        self.version = version().decode()

    def mark_begin(self):
        return self._begin()

    def mark_end(self, depth):
        return self._end(depth)

    def usage(self):
        """{device ordinal: Usage} of every device that saw an allocation."""
        out = {}
        for dev in range(MAX_DEVICES):
            u = Usage()
            if self._usage(dev, ctypes.byref(u)) == 1:
                out[dev] = u
        return out

    def dump(self, path):
        return self._dump(os.fsencode(path)) == 0


def loaded():
    """The Library when libcumemtrace.so is in this process, else None (also
    when it is an older one without the mark API)."""
    try:
        return Library(ctypes.CDLL(None))
    except (AttributeError, OSError):
        return None


def find():
    """Path of a libcumemtrace.so to preload, or None: $CUMEMTRACE_LIB (the
    override), else the one of this installation (pip install), else
    ../lib/libcumemtrace.so or ./libcumemtrace.so beside a `cumemtrace` on
    PATH (an installed prefix or a build directory)."""
    env = os.environ.get("CUMEMTRACE_LIB")
    if env:
        return env if os.path.isfile(env) else None
    try:
        from cumemtrace import _native
    except ImportError:  # the plugin copied on its own
        _native = None
    own = _native.library() if _native is not None else None
    if own:
        return own
    cli = shutil.which("cumemtrace")
    if cli:
        here = os.path.dirname(os.path.realpath(cli))
        for cand in (os.path.join(here, "..", "lib", "libcumemtrace.so"),
                     os.path.join(here, "libcumemtrace.so")):
            if os.path.isfile(cand):
                return os.path.normpath(cand)
    return None
