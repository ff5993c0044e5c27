"""What handing PyTorch's segment layout to the library adds to a dump's
reading of PyTorch's figures (the refresh before every
signal, periodic, API and pytest-mark dump now hands the layout over too).
Under `cumemtrace run` (the history on, as by default), the layer's own
reading (layer/dumps.py's report_state) is timed without and with the
layout, alternately, ROUNDS times each, in two states: a small training
loop's (elementwise.py's layers, Adam, as dump_midrun.py) and the same with
EXTRA more live tensors of 4 KiB (one block each, in 2 MiB segments).

    layout_cost.py TORCHBOOT_DIR [EXTRA]
Prints one COST line: per state, the blocks and segments, and the best and
median milliseconds of a reading without and with the layout."""
import json
import os
import statistics
import sys
import time

import torch

from elementwise import Elementwise

spec = __import__("importlib.util").util.spec_from_file_location(
    "cumemtrace_torch", os.path.join(sys.argv[1], "cumemtrace_torch.py"))
layer = __import__("importlib.util").util.module_from_spec(spec)
spec.loader.exec_module(layer)
EXTRA = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
ROUNDS = 7
N = 1 << 20


model = Elementwise(4, N, bias=False)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
x = torch.randn(N, device="cuda")
for _ in range(3):
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    opt.step()
torch.cuda.synchronize()

library, dumps, layout = layer.part("library"), layer.part("dumps"), layer.part("layout")
state = library.facts_fn("cumemtrace_allocator_state")
handoff = [layout.segments_fn()]
assert state is not None and handoff[0] is not None, "run under cumemtrace"


def measure():
    segs = torch.cuda.memory._snapshot()["segments"]
    out = {"segments": len(segs), "blocks": sum(len(s["blocks"]) for s in segs),
           "without_ms": [], "with_ms": []}
    for _ in range(ROUNDS):
        for key, h in (("without_ms", None), ("with_ms", handoff)):
            t = time.perf_counter()
            dumps.report_state(torch, state, h)
            out[key].append((time.perf_counter() - t) * 1e3)
    assert handoff[0] is not None, "the layout hand-off failed"
    for key in ("without_ms", "with_ms"):
        v = out.pop(key)
        out[key] = {"best": min(v), "median": statistics.median(v)}
    return out


dumps.report_state(torch, state, handoff)  # the first reading imports torch._inductor
small = measure()
kept = [torch.empty(1024, device="cuda") for _ in range(EXTRA)]
many = measure()
print("COST " + json.dumps({"small": small, "many": many, "extra": EXTRA}))
