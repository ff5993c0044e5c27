"""The peak's tensors: 8 elementwise blocks, forward and backward once,
argv[1] "fp32" keeps every activation for backward, "ckpt" recomputes each
block's activations in backward (torch.utils.checkpoint).  The peak's
tensors must hold max_memory_allocated exactly, and name the activation
lines that the checkpointing run no longer holds at its peak."""
import json
import sys

import torch
from torch.utils.checkpoint import checkpoint

import settle  # noqa: F401 (PyTorch's exit race after backward())

N = 1 << 20
ckpt = sys.argv[1] == "ckpt"


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(N))

    def forward(self, x):
        h = torch.tanh(x * self.w)  # ACT
        return torch.sigmoid(h * self.w)  # ACT2


blocks = torch.nn.ModuleList(Block() for _ in range(8)).cuda()  # PARAMS
x = torch.ones(N, device="cuda", requires_grad=True)  # INPUT


def run(x):
    for b in blocks:
        x = checkpoint(b, x, use_reentrant=False) if ckpt else b(x)  # CALL
    return x.sum()


run(x).backward()  # STEP
print("TORCH " + json.dumps({"max_allocated": torch.cuda.max_memory_allocated(),
                             "allocated": torch.cuda.memory_allocated()}))
