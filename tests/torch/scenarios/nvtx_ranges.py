"""Scenario: the program's NVTX ranges as phases - torch.cuda.nvtx.range_push
and range(), and autograd's emit_nvtx(), whose NVTX ranges name every op -
each allocating segments of its own (sizes no cached block can serve)."""
import json

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

MiB = 1 << 20

assert torch.cuda.is_available()
torch.cuda.nvtx.range_push("train")
a = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")      # a 64 MiB segment
torch.cuda.nvtx.range_pop()
in_train = torch.cuda.memory_reserved()
with torch.cuda.nvtx.range("validation"):
    with torch.cuda.nvtx.range("step 1200"):
        b = torch.empty(128 * MiB, dtype=torch.uint8, device="cuda")  # a 128 MiB segment
in_validation = torch.cuda.memory_reserved() - in_train
x = torch.ones(4 * MiB // 4, device="cuda", requires_grad=True)   # outside: a 20 MiB segment
outside = torch.cuda.memory_reserved() - in_train - in_validation
with torch.autograd.profiler.emit_nvtx():
    y = (x * 3).sum()
    y.backward()
print("TORCH " + json.dumps({
    "in_train": in_train,
    "in_validation": in_validation,
    "outside": outside,
    "reserved": torch.cuda.memory_reserved(),
    "max_reserved": torch.cuda.max_memory_reserved(),
}, sort_keys=True))
