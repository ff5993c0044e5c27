"""The cost of PyTorch's phases (make bench: scripts/bench_torch_phases.py):
a small real model's training step - 8 x (nn.Linear(512, 512), ReLU), 17
module calls a step, AdamW, batch 64 - on the simulated GPU, where kernels
take no time, so the step is all Python, dispatch and allocator work: the
worst case for a Python call per module call.

  phases_cost.py wall N R     best and median microseconds a step over R
                              blocks of N steps
  phases_cost.py instr N LIB  N steps between LIB's callgrind client
                              requests (tests/bench/cg_requests.c): only they
                              are counted, on every thread"""
import ctypes
import json
import statistics
import sys
import time

import torch

torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 512, device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    opt.step()


for _ in range(5):
    step()
torch.cuda.synchronize()
mode, n = sys.argv[1], int(sys.argv[2])
if mode == "wall":
    per = []
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t) / n * 1e6)
    print("COST " + json.dumps({"best_us": min(per), "median_us": statistics.median(per)}))
else:
    mark = ctypes.CDLL(sys.argv[3])
    mark.cg_start()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    mark.cg_stop(b"steps")
    print("COST " + json.dumps({"steps": n}))
