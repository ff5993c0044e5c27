"""A training loop that runs until it is killed (test_killed.py).

Each step trains elementwise layers with Adam (as train_adam.py) and keeps
one more 12 MiB tensor - a growing history, so the caching allocator asks
CUDA for exactly one new segment per step and what the process holds moves
while the kill comes.  After each step it appends its own truth to LOG, one
line: step, wall-clock ns, cudaMalloc calls, cudaFree calls, live segments,
reserved bytes (PyTorch's memory_stats()).  The first line is its pid."""
import os
import sys
import time

import torch

from elementwise import Elementwise

MiB = 1 << 20
N = 1 * MiB           # elements per activation (4 MiB of float32)
KEEP = 12 * MiB // 4  # elements of each kept tensor: its own 12 MiB segment
STEPS = 1000          # at most; the test kills it long before
PACE_S = 0.01         # a step every ~10 ms: ~12 MiB more every 10 ms


log = open(sys.argv[1], "w", buffering=1)
log.write(f"pid {os.getpid()}\n")
model = Elementwise(2, N, bias=False)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
x = torch.randn(N, device="cuda")
history = []
for step in range(STEPS):
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    opt.step()
    history.append(torch.empty(KEEP, device="cuda"))  # HISTORY
    s = torch.cuda.memory_stats()
    log.write(f"{step} {time.time_ns()} {s['segment.all.allocated']} "
              f"{s['segment.all.freed']} {s['segment.all.current']} "
              f"{torch.cuda.memory_reserved()}\n")
    time.sleep(PACE_S)
print("not killed", file=sys.stderr)
sys.exit(3)
