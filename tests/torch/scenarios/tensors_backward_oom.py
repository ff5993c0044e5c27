"""An OOM in loss.backward() - the failing request comes from
autograd's thread, which has no Python frames; the live tensors are the
forward's saved activations (named by their lines) and what backward made
so far (no Python stack, in PyTorch's snapshot as in ours)."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

import truth

MiB = 1 << 20
w = torch.nn.Parameter(torch.ones(64 * MiB, device="cuda"))  # WEIGHT


def forward(x):
    h = torch.tanh(x * w)  # ACT1
    h = torch.sigmoid(h * w)  # ACT2
    return h.sum()


x = torch.ones(64 * MiB, device="cuda")  # INPUT
loss = forward(x)
truth.dump_at_oom()
raised = False
try:
    loss.backward()  # BACKWARD
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "allocated": torch.cuda.memory_allocated()}))
sys.exit(0)
