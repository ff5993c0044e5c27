"""An nn.Linear MLP trained with AdamW: forward through cublasLtMatmul (bias
epilogue), backward through cublasGemmEx, PyTorch's workspaces from its
caching allocator.  Prints PyTorch's own peak figures."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                            torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(steps):
    x = torch.randn(batch, 1024, device="cuda")
    loss = model(x).square().mean()  # FORWARD
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
s = torch.cuda.memory_stats()
print("TORCH " + json.dumps({
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "reserved": torch.cuda.memory_reserved(),
    "allocated": torch.cuda.memory_allocated(),
    "stats_peak_allocated": s["allocated_bytes.all.peak"],
    "stats_peak_reserved": s["reserved_bytes.all.peak"],
    "segments_allocated": s["segment.all.allocated"],
}, sort_keys=True))
