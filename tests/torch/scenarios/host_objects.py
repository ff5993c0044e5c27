"""The host's own objects, which the PyTorch layer reads at a dump (roles,
phases), must never see it: each mode builds one kind of object that would
notice a read or a hash, trains a little, fails one request inside a
forward (the OOM observer reads then) and ends (the exit snapshot reads
again).  What the objects saw is printed by an exit handler registered
before CUDA starts, so it runs after the layer's own exit work.
  eq          an optimizer class that defines __eq__ (so it is unhashable)
  dataclass   an optimizer that is a @dataclass (eq=True: unhashable too)
  subclass    a tensor subclass whose __torch_function__ prints, as a buffer
              and as a parameter
  mode        a TorchFunctionMode active for the whole run, counting calls
  getattr     a Module whose __getattribute__ counts the reads of it
  half        a Module whose __init__ skipped super().__init__(), alive
              beside a trained model (its roles must still be counted)"""
import atexit
import dataclasses
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
from torch.overrides import TorchFunctionMode

torch.manual_seed(0)
MODE = sys.argv[1]
seen = []  # what the host's objects saw, in order


class Huge(torch.nn.Module):
    def forward(self, x):
        return x + torch.empty(64 << 30, dtype=torch.uint8, device=x.device).sum()


class EqSGD(torch.optim.SGD):
    def __eq__(self, other):
        return self is other


class DataSGD(torch.optim.SGD):
    """An optimizer that is a dataclass: eq=True sets __hash__ to None."""


DataSGD = dataclasses.dataclass(eq=True, init=False)(DataSGD)


def loud(cls, func, types, args=(), kwargs=None):
    seen.append(getattr(func, "__name__", str(func)))
    print("Loud:", seen[-1])
    with torch._C.DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))


class Loud(torch.Tensor):
    """Prints every torch call that reaches it."""
    __torch_function__ = classmethod(loud)


class LoudParameter(torch.nn.Parameter):
    __torch_function__ = classmethod(loud)


class Count(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        seen.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class Watched(torch.nn.Linear):
    def __getattribute__(self, name):
        seen.append(name)
        return super().__getattribute__(name)


class Half(torch.nn.Module):
    def __init__(self):
        pass  # no super().__init__(): no _parameters, _buffers, _modules


@atexit.register
def report():
    # Registered before CUDA starts: it runs after the layer's exit work.
    print("TORCH " + json.dumps({"mode": MODE, "seen": len(seen),
                                 "names": sorted(set(seen))}, sort_keys=True))


if MODE == "mode":
    Count().__enter__()  # active to the end, exit handlers included
layers = [torch.nn.Linear(256, 256), Watched(256, 256) if MODE == "getattr"
          else torch.nn.Linear(256, 256)]
model = torch.nn.Sequential(*layers).cuda()
if MODE == "subclass":
    model.register_buffer("loud", torch.zeros(64, device="cuda").as_subclass(Loud))
    model[0].register_parameter("loud", LoudParameter(torch.zeros(64, device="cuda")))
half = Half() if MODE == "half" else None
params = list(model.parameters())
if MODE == "eq":
    opt = EqSGD(params, lr=0.1)
elif MODE == "dataclass":
    opt = DataSGD(params, lr=0.1)
else:
    opt = torch.optim.Adam(params, lr=0.1)
x = torch.randn(64, 256, device="cuda")
for _ in range(2):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
model.add_module("huge", Huge())
try:
    model(x)
except torch.OutOfMemoryError:
    seen.append("oom")
del model.huge
print("stepped", MODE)
