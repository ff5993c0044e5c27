"""An optimizer step that raises: the closure of the second of four SGD
steps fails (PyTorch then runs no step post hook), the program catches it
and trains on; after the loop the device's peak is reached outside any
step - a 256 MiB tensor made at the top level."""
import json

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

torch.manual_seed(0)
model = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 512, device="cuda")
raised = 0


def failing():
    raise ValueError("the closure failed")


for step in range(4):
    opt.zero_grad()
    model(x).square().mean().backward()
    try:
        opt.step(failing if step == 1 else None)
    except ValueError:
        raised += 1
big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # PEAK
torch.cuda.synchronize()
print("TORCH " + json.dumps({"raised": raised, "max_reserved": torch.cuda.max_memory_reserved()}))
