"""A leak across steps - each step's clone is kept in a list
(6 x 128 MiB from one line, or argv[1] steps), the step's temporaries are
freed; at exit the report must name the clones' line with their bytes, as
PyTorch's own snapshot does."""
import json
import sys

import torch

import truth

MiB = 1 << 20
x = torch.ones(32 * MiB, device="cuda")  # INPUT
kept = []


def step(i):
    y = torch.tanh(x * i)  # TEMP
    kept.append(y.clone())  # LEAK
    return float(y.sum())


for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
    step(i)
truth.dump()
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "max_allocated": torch.cuda.max_memory_allocated(),
                             "reserved": torch.cuda.memory_reserved()}))
