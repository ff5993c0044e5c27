"""Roles: a model whose parameter, buffer, gradient and AdamW-state sizes
are known exactly - four fp32 nn.Linear(1024, 1024) and a BatchNorm1d -
trained for three steps, then an activation kept to the end.  With "oom",
a request far beyond the card fails after training (inside the forward of
the module named `oom`, a child of the model).  PyTorch's figures at the
end (or at the failure) are printed for the test to judge the roles by."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

torch.manual_seed(0)
WIDTH = 1024


class Huge(torch.nn.Module):
    """Asks for more than the card in its forward."""
    def forward(self, x):
        return x + torch.empty(64 << 30, dtype=torch.uint8, device=x.device).sum()  # HUGE


model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(4)],
                            torch.nn.BatchNorm1d(WIDTH)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, WIDTH, device="cuda")
for step in range(3):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
torch.cuda.synchronize()
out = {"oom": None}
if sys.argv[1:] == ["oom"]:
    model.add_module("oom", Huge())
    try:
        model(x)
    except torch.OutOfMemoryError:
        out["oom"] = torch.cuda.memory_allocated()
with torch.no_grad():
    kept = model[0](x)  # KEPT: an activation alive at exit
torch.cuda.synchronize()
out.update(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
           params=[list(p.shape) for p in model.parameters()],
           buffers=[[b.numel(), b.element_size()] for b in model.buffers()],
           state_tensors=sum(1 for s in opt.state.values() for v in s.values()
                             if torch.is_tensor(v) and v.is_cuda))
print("TORCH " + json.dumps(out, sort_keys=True))
