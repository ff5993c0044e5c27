"""Drives cumemtrace's PyTorch layer (src/torchboot/cumemtrace_torch.py, layer/) by
hand on the simulated runtime, for tests/e2e/test_oom_layout.py: three
failed requests, each followed by what PyTorch's out-of-memory observer
hands over - segments tagged with num_ooms, then the facts.  A stand-in for
torch.cuda.memory._snapshot() lists three 8 MiB cudaMalloc'd buffers as
PyTorch segments.  The third OOM reports facts but no segments, the
fourth 1100 small segments.  Then, as the layer does at interpreter exit,
the layout tagged LAYOUT_STATE, its live blocks with Python frames (one
file name with characters JSON must escape)."""
import ctypes
import os
import sys
import types

build, boot = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, boot)
import cumemtrace_torch  # noqa: E402
from model import Runtime  # noqa: E402

library, layout = cumemtrace_torch.part("library"), cumemtrace_torch.part("layout")

MiB = 1 << 20
rt = Runtime(build)
bufs = [rt.malloc(8 * MiB) for _ in range(3)]


def fake_torch(segments):
    memory = types.SimpleNamespace(_snapshot=lambda: {"segments": segments})
    return types.SimpleNamespace(cuda=types.SimpleNamespace(memory=memory))


def segment(addr, blocks):
    at, out = addr, []
    for size, state, *frames in blocks:
        out.append({"address": at, "size": size, "state": state})
        if frames:
            out[-1]["frames"] = frames[0]
        at += size
    return {"device": 0, "address": addr, "total_size": 8 * MiB, "segment_type": "large",
            "blocks": out}


def facts(request, num_ooms):
    f = library.Facts()
    for name, _ in library.Facts._fields_:
        if name not in ("size", "name", "version", "config", "top_tensors"):  # a pointer
            setattr(f, name, -1)
    f.size = ctypes.sizeof(library.Facts)
    f.name = b"pytorch"
    f.version = b"0.0-stand-in"
    f.config = b""
    f.requested_bytes = request
    f.num_ooms = num_ooms
    return f


def fail(size):
    try:
        rt.malloc(size)
    except MemoryError:
        return
    raise SystemExit(f"cudaMalloc({size}) did not fail")


seg_fn, report = layout.segments_fn(), library.facts_fn()
assert seg_fn is not None and report is not None, "run under libcumemtrace.so"
first = [segment(b, [(4 * MiB, "active_allocated"), (2 * MiB, "inactive"),
                     (2 * MiB, "active_pending_free")]) for b in bufs]
second = [segment(bufs[1], [(8 * MiB, "inactive")])]
# more than the library keeps (1024 segments): the rest are only counted
many = [{"device": 0, "address": (1 << 44) + i * 2 * MiB, "total_size": 2 * MiB,
         "segment_type": "small", "blocks": [{"address": (1 << 44) + i * 2 * MiB,
                                              "size": 2 * MiB, "state": "inactive"}]}
        for i in range(1100)]
for size, tag, segs in ((1 << 40, 5, first), (2 << 40, 6, second), (3 << 40, 7, None),
                        (4 << 40, 8, many)):
    fail(size)
    if segs is not None:
        layout.segments(fake_torch(segs), 0, tag, seg_fn)
    report(0, ctypes.byref(facts(size, tag)))
TRAIN = [{"filename": "/w/train.py", "line": 12, "name": "step"},
         {"filename": "/w/train.py", "line": 40, "name": "<module>"}]
ODD = [{"filename": '/w/we"ird\\na\tme.py', "line": 3, "name": "f"}]
at_exit = [segment(bufs[0], [(4 * MiB, "active_allocated", TRAIN), (4 * MiB, "inactive")]),
           segment(bufs[2], [(2 * MiB, "active_allocated", ODD),
                             (2 * MiB, "active_allocated", TRAIN),
                             (4 * MiB, "active_pending_free", [])])]
layout.segments(fake_torch(at_exit), 0, library.LAYOUT_STATE, seg_fn)
# refused, and the state kept: a block naming a stack past nstacks, a
# negative tag other than LAYOUT_STATE
blk = (library.Block * 1)()
blk[0].size, blk[0].state, blk[0].stack = MiB, 1, 2
seg = (library.Segment * 1)()
seg[0].address, seg[0].size, seg[0].nblocks = bufs[1], 8 * MiB, 1
seg[0].blocks = ctypes.cast(blk, ctypes.POINTER(library.Block))
text = (ctypes.c_char_p * 1)(b"/w/x.py:1:f")
assert seg_fn(0, library.LAYOUT_STATE, seg, 1, text, 1) == -1
blk[0].stack = 1
assert seg_fn(0, -2, seg, 1, text, 1) == -1
print("reported")
