"""Who reached the device's peak (cumemtrace_peak_context), for
tests/e2e/test_python.py: a few allocations prove the frame layout, then
Block.forward - an instance among two of one class - reaches the peak
(GIL held, or released with "nogil"), or a thread named pt_autograd_0
does ("thread").  Prints one PEAK line: whether the peak's frames hold
that instance as the `self` of a frame named forward, the thread's name,
and what cumemtrace_peak_phase answered (for the peak seen, and for a
stale peak time)."""
import ctypes
import json
import sys
import threading

from model import Runtime

build, how = sys.argv[1], sys.argv[2]
rt = Runtime(build, hold_gil=how != "nogil")
MiB = 1 << 20


class Block:
    def __init__(self, mib):
        self.mib = mib

    def forward(self, keep):
        keep.append(rt.malloc(self.mib * MiB))


def warm(keep):
    for _ in range(4):  # stacks of two frames or more prove the layout
        keep.append(rt.malloc(MiB))


keep = []
warm(keep)
blocks = [Block(2), Block(64)]
if how == "thread":
    def named():
        libc = ctypes.CDLL(None)
        libc.prctl(15, b"pt_autograd_0", 0, 0, 0)  # PR_SET_NAME
        blocks[1].forward(keep)
    t = threading.Thread(target=named)
    t.start()
    t.join()
else:
    for b in blocks:
        b.forward(keep)


class PeakContext(ctypes.Structure):
    _fields_ = [("peak_time_ns", ctypes.c_int64), ("thread", ctypes.c_char * 16),
                ("nselves", ctypes.c_uint32), ("selves", ctypes.c_uint64 * 32),
                ("names", ctypes.c_uint64 * 32)]


lib = ctypes.CDLL(None)
lib.cumemtrace_peak_context.argtypes = [ctypes.c_int, ctypes.POINTER(PeakContext)]
lib.cumemtrace_peak_phase.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_char_p,
                                      ctypes.c_char_p]
c = PeakContext()
got = lib.cumemtrace_peak_context(0, ctypes.byref(c))
pairs = [(c.selves[i], c.names[i]) for i in range(c.nselves)]
out = {
    "got": got,
    "self_in_forward": (id(blocks[1]), id(sys.intern("forward"))) in pairs,
    "other_instance": any(s == id(blocks[0]) for s, _ in pairs),
    "thread": c.thread.decode(),
    "stale": lib.cumemtrace_peak_phase(0, c.peak_time_ns + 1, b"torch", b"forward/X"),
    "named": lib.cumemtrace_peak_phase(0, c.peak_time_ns, b"torch", b"forward/Net/blocks.1"),
    "again": lib.cumemtrace_peak_phase(0, c.peak_time_ns, b"torch", b"backward"),
}
print("PEAK " + json.dumps(out, sort_keys=True))
