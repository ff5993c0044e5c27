"""Model parameters moved to the GPU with .cuda() - PyTorch
allocates them inside module.py's _apply chain; the line to name is the
user's `.cuda()` call.  An embedding, a layer norm and elementwise
parameters (no matmul: cuBLAS does not run on the simulated GPU)."""
import json

import torch

import truth


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(65536, 512)
        self.norm = torch.nn.LayerNorm(512)
        self.scale = torch.nn.Parameter(torch.ones(4096, 512))


model = Net().cuda()  # PARAMS
buf = torch.zeros(8 << 20, device="cuda")  # BUFFER
truth.dump()
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "params": sum(p.numel() * p.element_size()
                                           for p in model.parameters())}))
