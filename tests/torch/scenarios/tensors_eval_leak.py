"""A leak a user makes: an eval pass run without torch.no_grad() whose
logits are kept in a list across eval steps (for metrics), each keeping its
graph.  Each training step's temporaries are freed first, so the kept
logits sit in cached segments the training step created: a view that names
the line that created each segment blames the training forward; the tensor
views must name the eval line (EVAL), with its growth per step.  After
steps 2 and 4 the script asks for an api dump (cumemtrace_dump, when the
tracer is loaded: the bare run has no such symbol) and at the end takes
PyTorch's own snapshot (truth.py)."""
import ctypes
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

import truth
from elementwise import Elementwise

MiB = 1 << 20
N = 8 * MiB  # 32 MiB a tensor: a large-pool segment each
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
model = Elementwise(1, N, bias=False)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
x = torch.randn(N, device="cuda")
kept = []


def train_step():
    opt.zero_grad(set_to_none=True)
    out = model(x)
    loss = (out * out * 2).sum()  # TRAIN
    loss.backward()
    opt.step()


def eval_step():
    logits = model(x) * 0.5  # EVAL
    kept.append(logits)


dump = getattr(ctypes.CDLL(None), "cumemtrace_dump", None)
for step in range(1, STEPS + 1):
    train_step()
    eval_step()
    if dump is not None and step in (2, 4):
        torch.cuda.synchronize()
        dump(("cumemtrace.step%d.json" % step).encode())
truth.dump()
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "max_allocated": torch.cuda.max_memory_allocated(),
                             "reserved": torch.cuda.memory_reserved(),
                             "kept": len(kept)}))
