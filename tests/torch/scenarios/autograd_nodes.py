"""Gradients that autograd's engine makes and the program keeps without
.grad (torch.autograd.grad's outputs): each block is made inside one node's
apply on autograd's thread, with no Python frame.  Run under
CUMEMTRACE_TORCH_STACKS=all the history keeps PyTorch's C++ frames, which
name the node.  Writes each gradient's storage address to grads.json (not
stdout: the bare and traced runs must print the same)."""
import json

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

import truth

w = torch.ones(1024, 1024, device="cuda", requires_grad=True)
v = torch.ones(64, 1024, device="cuda", requires_grad=True)
x = torch.ones(64, 1024, device="cuda")
loss = ((x @ w).tanh() * v).sum()
gw, gv = torch.autograd.grad(loss, [w, v])  # GRAD
with open("grads.json", "w") as f:
    json.dump({"w": gw.untyped_storage().data_ptr(), "v": gv.untyped_storage().data_ptr()}, f)
truth.dump()
print("TORCH " + json.dumps({"grads": [gw.numel(), gv.numel()]}))
