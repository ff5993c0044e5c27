"""A transformer-like forward runs out of memory at batch 16 -
token embeddings, per-layer layer norm and an elementwise attention
stand-in (no matmul: cuBLAS does not run on the simulated GPU).  The
post-mortem must name the lines holding the live tensors with PyTorch's
bytes, not the lines that first created each cached segment."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

import truth

BATCH, SEQ, DIM, LAYERS = int(sys.argv[1]) if len(sys.argv) > 1 else 16, 1024, 1024, 12


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM)
        self.gate = torch.nn.Parameter(torch.ones(DIM))

    def forward(self, x):
        h = self.norm(x)  # NORM
        a = torch.softmax(h * self.gate, dim=-1)  # ATTN
        return x + a * h  # RESIDUAL


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(32000, DIM)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))

    def forward(self, tokens):
        x = self.emb(tokens)  # EMBED
        for b in self.blocks:
            x = b(x)
        return x.float().pow(2).mean()


model = Model().cuda()
tokens = torch.zeros(BATCH, SEQ, dtype=torch.long, device="cuda")
truth.dump_at_oom()
raised = False
try:
    model(tokens).backward()
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "allocated": torch.cuda.memory_allocated()}))
