"""Issue 23: an OOM in loss.backward() - the failing request comes from
autograd's thread, which has no Python frames; the live tensors are the
forward's saved activations (named by their lines) and what backward made
so far (no Python stack, in PyTorch's snapshot as in ours)."""
import json
import time
import sys

import torch

import truth

MiB = 1 << 20
w = torch.nn.Parameter(torch.ones(64 * MiB, device="cuda"))  # WEIGHT


def forward(x):
    h = torch.tanh(x * w)  # ACT1
    h = torch.sigmoid(h * w)  # ACT2
    return h.sum()


x = torch.ones(64 * MiB, device="cuda")  # INPUT
loss = forward(x)
truth.dump_at_oom()
raised = False
try:
    loss.backward()  # BACKWARD
except torch.OutOfMemoryError:
    raised = True
# PyTorch's exit race: backward() returns before the autograd device thread
# drops its last reference to the graph task, whose thread-local state holds
# a Python object; that thread then waits for the GIL, and if the interpreter
# is finalising by the time it gets it, CPython ends the thread through a
# noexcept destructor: "terminate called without an active exception", exit
# 134 (2 of 6 bare runs of this script, no tracer).  Sleeping releases the GIL
# at once, so the device thread finishes first.
time.sleep(0.05)
print("TORCH " + json.dumps({"raised": raised, "allocated": torch.cuda.memory_allocated()}))
sys.exit(0)
