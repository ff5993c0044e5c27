"""Scenario: 70 NVTX start/end ranges in flight (torch.cuda.nvtx.range_start),
6 past the 64 a thread's stack keeps, all ended; then range_push("after")
with a 64 MiB segment in it and a 32 MiB segment outside any range."""
import json
import sys

import torch

MiB = 1 << 20

assert torch.cuda.is_available()
ids = [torch.cuda.nvtx.range_start("request") for _ in range(70)]
for i in ids:
    torch.cuda.nvtx.range_end(i)
level = torch.cuda.nvtx.range_push("after")
a = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
torch.cuda.nvtx.range_pop()
b = torch.empty(32 * MiB, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("TORCH " + json.dumps({"reserved": torch.cuda.memory_reserved()}, sort_keys=True))
# NVTX's answer: -2 with no tool attached (the bare run), so not on stdout
print("level", level, file=sys.stderr)
