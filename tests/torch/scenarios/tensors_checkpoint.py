"""The same training step twice - `plain` (every block's activations kept
for backward) or `ckpt` (each block under torch.utils.checkpoint: only its
input is kept, the rest recomputed in backward) - so that the peaks' tensors
of the two runs, compared by `diff`, name the activations that went (the
block's lines NORM, ATTN, MLP) and what checkpointing costs instead.
Elementwise layers only: no kernel takes time on the simulated GPU."""
import json
import sys

import torch
import torch.utils.checkpoint
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

MiB = 1 << 20
N, BLOCKS = 4 * MiB, 4  # 16 MiB a tensor
mode = sys.argv[1] if len(sys.argv) > 1 else "plain"


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(N, device="cuda"))

    def forward(self, x):
        h = torch.tanh(x * self.w)  # NORM
        a = torch.sigmoid(h) * h  # ATTN
        return x + torch.tanh(a)  # MLP


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(BLOCKS))

    def forward(self, x):
        for b in self.blocks:
            if mode == "ckpt":
                x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)  # CKPT
            else:
                x = b(x)  # CALL
        return x


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(N, device="cuda")
for step in range(2):
    opt.zero_grad(set_to_none=True)
    loss = model(x).sum()  # LOSS
    loss.backward()
    opt.step()
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "max_allocated": torch.cuda.max_memory_allocated()}))
