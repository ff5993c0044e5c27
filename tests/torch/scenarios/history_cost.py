"""The cost of CUMEMTRACE_TORCH_HISTORY=1: a small training loop (elementwise
layers, autograd, Adam) timed with PyTorch's allocation history off and on,
alternately in one process, with exactly the recording our layer turns on
(cumemtrace_torch._start_history).  Prints the best time of each and their
ratio.  On the simulated GPU kernels take no time, so the loop is all
Python, dispatch and allocator work: the ratio is an upper bound of what a
real GPU's step, whose kernels take time, pays."""
import json
import os
import sys
import time

import torch

import cumemtrace_torch  # from build/share/cumemtrace/torchboot (PYTHONPATH)

N = 1 << 16
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
ROUNDS = 5


class Elementwise(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.w = torch.nn.ParameterList(
            torch.nn.Parameter(torch.ones(N, device="cuda")) for _ in range(layers))
        self.b = torch.nn.ParameterList(
            torch.nn.Parameter(torch.zeros(N, device="cuda")) for _ in range(layers))

    def forward(self, x):
        for w, b in zip(self.w, self.b):
            x = torch.tanh(x * w + b)
        return x


model = Elementwise(8)
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


steps()  # warm-up: the optimizer's state, the allocator's segments
os.environ["CUMEMTRACE_TORCH_HISTORY"] = "1"
off, on, seen_off, seen_on = [], [], [], []
for _ in range(ROUNDS):
    off.append(steps())
    seen_off.append(recorded())
    cumemtrace_torch._start_history(torch)
    on.append(steps())
    seen_on.append(recorded())
    torch.cuda.memory._record_memory_history(enabled=None)
print("TORCH " + json.dumps({"off_s": min(off), "on_s": min(on), "steps": STEPS,
                             "ratio": min(on) / min(off), "recorded_off": seen_off,
                             "recorded_on": seen_on}))
