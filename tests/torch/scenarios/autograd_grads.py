"""Gradients made in backward and kept in parameters' .grad: autograd's
thread allocates them with no Python frame running, and AccumulateGrad
keeps them.  A third parameter's .grad is set by the program itself, on a
line of its own.  argv[1] "own" records PyTorch's history the program's
own way (before CUDA starts): a block with no frames is then not known to
come from autograd's thread, and none may be named so.  Writes the .grad
storages' addresses to grads.json (not stdout: the bare and traced runs
must print the same)."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

import truth

MiB = 1 << 20
if sys.argv[1:] == ["own"]:
    torch.cuda.memory._record_memory_history(enabled="state", context="alloc", stacks="python")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.ones(4 * MiB, device="cuda"))  # W1
        self.w2 = torch.nn.Parameter(torch.ones(2 * MiB, device="cuda"))  # W2
        self.w3 = torch.nn.Parameter(torch.ones(MiB, device="cuda"))  # W3


net = Net()
w1, w2, w3 = net.w1, net.w2, net.w3
x = torch.ones(4 * MiB, device="cuda")  # INPUT
loss = ((x * w1).tanh()[: 2 * MiB] * w2).sum()  # FORWARD
loss.backward()
w3.grad = torch.zeros_like(w3)  # USER_GRAD
with open("grads.json", "w") as f:
    json.dump({"backward": [w1.grad.untyped_storage().data_ptr(),
                            w2.grad.untyped_storage().data_ptr()],
               "user": [w3.grad.untyped_storage().data_ptr()]}, f)
truth.dump()
print("TORCH " + json.dumps({"grads": [w.grad.numel() for w in (w1, w2, w3)]}))
