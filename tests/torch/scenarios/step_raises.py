"""An optimizer step that raises: the closure of the second of four SGD
steps fails (PyTorch then runs no step post hook), the program catches it
and trains on; after the loop the device's peak is reached outside any
step - a 256 MiB tensor made at the top level.  Arguments: `last` - the
fourth step fails: the peak comes before any later step hook; `handler` -
the except clause keeps a 96 MiB tensor of its own (a segment made while
the exception is handled); `short` - no segments made from a function
before the steps (the library reads no frame directly yet)."""
import json
import sys
import traceback

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

torch.manual_seed(0)
model = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 512, device="cuda")
raised = 0


def held(mib):
    return torch.empty(mib << 20, dtype=torch.uint8, device="cuda")


# Segments made from a function, as any longer run makes them: the
# library then reads the peak's frames directly (the walk is proven).
kept = [held(mib) for mib in (3, 5, 7)] if "short" not in sys.argv[1:] else []
failing_step = 3 if "last" in sys.argv[1:] else 1


def failing():
    raise ValueError("the closure failed")


for step in range(4):
    opt.zero_grad()
    model(x).square().mean().backward()
    try:
        opt.step(failing if step == failing_step else None)
    except ValueError as e:
        raised += 1
        # the host's traceback, compared bare and traced by the test
        print("RAISED", [(f.name, f.line) for f in traceback.extract_tb(e.__traceback__)])
        if "handler" in sys.argv[1:]:
            kept.append(torch.empty(96 << 20, dtype=torch.uint8, device="cuda"))  # HANDLER
big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # PEAK
torch.cuda.synchronize()
print("TORCH " + json.dumps({"raised": raised, "max_reserved": torch.cuda.max_memory_reserved()}))
