"""PyTorch's phases (forward, backward, the optimizer step, the module):
a model whose device peak is reached in the backward of a known module -
`wide`, a Linear(1024, 16384), whose weight's gradient (64 MiB) and the
gradient of its input are the largest allocations of the step - trained
for three AdamW steps.  With "oom", a fourth step's forward fails inside
the module named `huge` (its forward asks for more than the card); with
"oom0" the first step's forward does, before any optimizer step."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

torch.manual_seed(0)


class Huge(torch.nn.Module):
    def forward(self, x):
        return x + torch.empty(64 << 30, dtype=torch.uint8, device=x.device).sum()  # HUGE


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(1024, 1024)
        self.wide = torch.nn.Linear(1024, 16384)
        self.out = torch.nn.Linear(16384, 8)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        x = self.wide(x)
        if hasattr(self, "huge"):
            x = self.huge(x)
        return self.out(x)


model = Net().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
if sys.argv[1:] == ["oom0"]:
    model.add_module("huge", Huge())
    try:
        model(x)
    except torch.OutOfMemoryError:
        print("TORCH " + json.dumps({"oom": True}))
    sys.exit(0)
for step in range(3):
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()
torch.cuda.synchronize()
out = {"oom": None, "max_reserved": torch.cuda.max_memory_reserved()}
if sys.argv[1:] == ["oom"]:
    model.add_module("huge", Huge())
    opt.zero_grad(set_to_none=True)
    try:
        model(x)
    except torch.OutOfMemoryError:
        out["oom"] = True
print("TORCH " + json.dumps(out, sort_keys=True))
