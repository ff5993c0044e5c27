"""At the exit: a few steps of an elementwise model (no
matmul: cuBLAS does not run on the simulated GPU) leave parameters, Adam
state, kept activations and cached free blocks in PyTorch's segments (small
and large pool, blocks split).  PyTorch's own snapshot of them is taken as
the script ends (truth.dump: nothing allocates on the GPU after it), where
cumemtrace's exit snapshot takes PyTorch's layout too."""
import json

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

import truth

MiB = 1 << 20
scale = torch.nn.Parameter(torch.ones(512, 256, device="cuda"))  # SCALE
wide = torch.nn.Parameter(torch.randn(1024, 1024, device="cuda"))  # WIDE
opt = torch.optim.Adam([scale, wide])
kept = []
for step in range(3):
    x = torch.randn(512, 256, device="cuda")  # INPUT
    y = (torch.relu(x * scale) * 3).sum() + (wide * wide).sum()
    y.backward()
    opt.step()
    opt.zero_grad()
    kept.append(torch.relu(x * 2))  # KEPT
big = torch.empty(9 * MiB, dtype=torch.uint8, device="cuda")  # BIG
del kept[0]
truth.dump()
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "reserved": torch.cuda.memory_reserved()}))
