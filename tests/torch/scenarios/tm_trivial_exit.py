"""A trivial script: one tensor, then exit.  Its last atexit handler (the
first registered) says which of torch's lazy modules are loaded by then:
the tracer's exit reading (PyTorch's memory snapshot, with each block's
stack) must not import torch._inductor or torch._dynamo, which the bare
run never loads (about 1 s of CPU)."""
import atexit
import json
import sys

import torch


def at_end():
    print("TORCH " + json.dumps({m: m in sys.modules for m in ("torch._inductor",
                                                                "torch._dynamo")}))


atexit.register(at_end)
x = torch.ones(1 << 20, device="cuda")  # KEEP
