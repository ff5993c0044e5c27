"""A leak of logits across steps: each training step (SGD) is followed by
an evaluation pass without no_grad whose logits are kept in a list - 1 MiB
a step from evaluate()'s line.  Growth by line must name that line with
its rate a step and the steps, and nothing else (the training step's own
tensors come and go).  argv[1]: steps (8)."""
import json
import sys

import torch

import truth

torch.manual_seed(0)
model = torch.nn.Linear(256, 4096).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device="cuda")
kept = []


def evaluate():
    return model(x)  # LOGITS


for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    opt.step()
    kept.append(evaluate())  # KEEP
truth.dump()
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "logits": kept[0].untyped_storage().nbytes()}))
