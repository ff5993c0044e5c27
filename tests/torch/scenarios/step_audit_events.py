"""A training loop whose steps 4-13 are watched by an audit hook of the
program's own (sys.addaudithook), which counts the events it sees - those a
host's auditing would log.  Bare, the program's steps raise only PyTorch's
own; traced, the layer's step hooks add theirs (ctypes reads of memory,
frame reads, id()).  The counts go to stderr, so that stdout stays the same
bare and traced; the TORCH line says how many steps were watched."""
import json
import sys

import torch

watched = [False]
counts = {}


def hook(event, args):
    if watched[0]:
        counts[event] = counts.get(event, 0) + 1


sys.addaudithook(hook)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 256)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(32, 256, device="cuda")
for step in range(1, 14):
    watched[0] = step >= 4
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()
watched[0] = False
torch.cuda.synchronize()
sys.stderr.write("AUDIT " + json.dumps(counts) + "\n")
print("TORCH " + json.dumps({"steps": 10}))
