"""Drives cumemtrace's PyTorch layer (src/torchboot/cumemtrace_torch.py) by
hand on the simulated runtime, for tests/e2e/test_oom_layout.py: three
failed requests, each followed by what PyTorch's out-of-memory observer
hands over - segments tagged with num_ooms, then the facts.  A stand-in for
torch.cuda.memory._snapshot() lists three 8 MiB cudaMalloc'd buffers as
PyTorch segments.  The third OOM reports facts but no segments, the
fourth 1100 small segments."""
import ctypes
import os
import sys
import types

build, boot = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, boot)
import cumemtrace_torch as layer  # noqa: E402
from model import Runtime  # noqa: E402

MiB = 1 << 20
rt = Runtime(build)
bufs = [rt.malloc(8 * MiB) for _ in range(3)]


def fake_torch(segments):
    memory = types.SimpleNamespace(_snapshot=lambda: {"segments": segments})
    return types.SimpleNamespace(cuda=types.SimpleNamespace(memory=memory))


def segment(addr, blocks):
    at, out = addr, []
    for size, state in blocks:
        out.append({"address": at, "size": size, "state": state})
        at += size
    return {"device": 0, "address": addr, "total_size": 8 * MiB, "segment_type": "large",
            "blocks": out}


def facts(request, num_ooms):
    f = layer.Facts()
    for name, _ in layer.Facts._fields_:
        if name not in ("size", "name", "version", "config", "top_tensors"):  # a pointer
            setattr(f, name, -1)
    f.size = ctypes.sizeof(layer.Facts)
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


seg_fn, report = layer._segments_fn(), layer._library()
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
        layer.segments(fake_torch(segs), 0, tag, seg_fn)
    report(0, ctypes.byref(facts(size, tag)))
print("reported")
