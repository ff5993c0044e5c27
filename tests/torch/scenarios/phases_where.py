"""Where the device's peak and an OOM happened, named by default (no
module hook; src/torchboot/layer/phases.py).  MODE:
  forward        inference through two blocks of one class: each block's
                 `mlp` allocates a temporary in its forward, block 1's
                 (256 MiB) the largest of the run, so the peak is reached
                 in `blocks.1.mlp` - the instance, not the class
  step           a Linear(4096, 4096) and AdamW: its first step allocates
                 the state (exp_avg, exp_avg_sq: 128 MiB), the peak of the
                 run, inside the optimizer's step 1
  oom_backward   a custom Function whose backward asks for more than the
                 card: the OOM happens on autograd's thread
Prints one TORCH line (PyTorch's max reserved) and, on stderr (the tracer
may change it), "HOOKS n": the global module hooks registered at the end."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

torch.manual_seed(0)
mode = sys.argv[1]


class MLP(torch.nn.Module):
    def __init__(self, temp_mib):
        super().__init__()
        self.up = torch.nn.Linear(256, 256)
        self.temp_mib = temp_mib

    def forward(self, x):
        t = torch.ones(self.temp_mib << 18, device=x.device)  # TEMP (fp32: 4 B each)
        return self.up(x) + t[:1]


class Block(torch.nn.Module):
    def __init__(self, temp_mib):
        super().__init__()
        self.mlp = MLP(temp_mib)

    def forward(self, x):
        return torch.relu(self.mlp(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(64), Block(256)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Huge(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g + torch.empty(64 << 30, dtype=torch.uint8, device=g.device).sum()


out = {"oom": None}
if mode == "forward":
    model = Net().cuda()
    with torch.no_grad():
        model(torch.randn(64, 256, device="cuda"))
elif mode == "step":
    model = torch.nn.Linear(4096, 4096, bias=False).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    x = torch.randn(8, 4096, device="cuda")
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()
elif mode == "oom_backward":
    w = torch.randn(1024, device="cuda", requires_grad=True)
    try:
        Huge.apply(w).sum().backward()
    except torch.OutOfMemoryError:
        out["oom"] = True
torch.cuda.synchronize()
m = torch.nn.modules.module
out["max_reserved"] = torch.cuda.max_memory_reserved()
print("TORCH " + json.dumps(out, sort_keys=True))
print(f"HOOKS {len(m._global_forward_pre_hooks) + len(m._global_forward_hooks)}", file=sys.stderr)
