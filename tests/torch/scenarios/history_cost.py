"""The cost of PyTorch's allocation history, which the tracer turns on by
default: a small training loop (elementwise layers, autograd,
Adam) timed with the history off and in each recording mode, alternately in
one process (best of ROUNDS each), with exactly the recording our layer
turns on (layer/history.py's HISTORY_MODE) and the other modes that keep a
live block's Python line.  On the simulated GPU kernels take no time, so
the loop is all Python, dispatch and allocator work: the ratio is an upper
bound of what a real GPU's step, whose kernels take time, pays.

    history_cost.py TORCHBOOT_DIR [STEPS]"""
import json
import os
import sys
import time

import torch

from elementwise import Elementwise

spec = __import__("importlib.util").util.spec_from_file_location(
    "cumemtrace_torch", os.path.join(sys.argv[1], "cumemtrace_torch.py"))
cumemtrace_torch = __import__("importlib.util").util.module_from_spec(spec)
spec.loader.exec_module(cumemtrace_torch)

N = 1 << 16
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ROUNDS = 5


model = Elementwise(8, N)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
x = torch.randn(N, device="cuda")


def steps():
    t = time.perf_counter()
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def recorded():
    """Whether the history is on: a tensor allocated here (on this thread:
    backward's allocations come from autograd's thread, without Python
    frames) has its allocation stack."""
    probe = torch.empty(1024, device="cuda")
    on = any(b.get("frames") for s in torch.cuda.memory._snapshot()["segments"]
             for b in s["blocks"] if b["address"] == probe.data_ptr())
    del probe
    return on


MODES = {"ours": cumemtrace_torch.part("history").HISTORY_MODE,
         "all_alloc_python": dict(enabled="all", context="alloc", stacks="python",
                                  max_entries=10000),
         "all_all_python": dict(enabled="all", context="all", stacks="python",
                                max_entries=10000),
         "state_alloc_all": dict(enabled="state", context="alloc", stacks="all")}
steps()  # warm-up: the optimizer's state, the allocator's segments
times = {m: [] for m in ["off", *MODES]}
seen_off, seen_on = [], []
for _ in range(ROUNDS):
    times["off"].append(steps())
    seen_off.append(recorded())
    for name, mode in MODES.items():
        torch.cuda.memory._record_memory_history(**mode)
        times[name].append(steps())
        if name == "ours":
            seen_on.append(recorded())
        torch.cuda.memory._record_memory_history(enabled=None)
best = {m: min(t) for m, t in times.items()}
print("TORCH " + json.dumps({"off_s": best["off"], "on_s": best["ours"], "steps": STEPS,
                             "ratio": best["ours"] / best["off"],
                             "modes": {m: best[m] / best["off"] for m in MODES},
                             "recorded_off": seen_off, "recorded_on": seen_on}))
