"""Scenario 2: a training loop of elementwise layers - parameters,
activations kept for backward, autograd, torch.optim.Adam(foreach=True) -
for several steps, and PyTorch's own accounting of it."""
import json

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

from elementwise import Elementwise

MiB = 1 << 20
N = 4 * MiB  # elements per activation (16 MiB of float32)


model = Elementwise(3, N)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
x = torch.randn(N, device="cuda")
for step in range(4):
    opt.zero_grad(set_to_none=True)
    # the forward pass: this line is in the stack of every activation the
    # layers (elementwise.py) keep for backward
    loss = model(x).sum()  # FORWARD
    loss.backward()
    opt.step()
torch.cuda.synchronize()
stats = torch.cuda.memory_stats()
print("TORCH " + json.dumps({
    "max_reserved": torch.cuda.max_memory_reserved(),
    "reserved": torch.cuda.memory_reserved(),
    "max_allocated": torch.cuda.max_memory_allocated(),
    "segments_allocated": stats["segment.all.allocated"],
    "segments_freed": stats["segment.all.freed"],
}, sort_keys=True))
