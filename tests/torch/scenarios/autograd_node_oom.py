"""An OOM in backward inside a custom autograd Function's backward: the
failing request is made on autograd's thread while its node
(WidenBackward) runs.  argv[1]: "plain" (no anomaly mode), "builtin"
(the OOM in PyTorch's own MulBackward0, whose thread runs no Python), "anomaly"
(set_detect_anomaly(True) around forward and backward: PyTorch keeps
each node's forward traceback) or "forward" (the OOM comes in forward,
on the main thread: no node).  The scenario's own out-of-memory observer
records torch._C._current_autograd_node() at the failure - the truth the
post-mortem's node is compared with - and the exception is printed whole,
so the bare and traced runs must raise the same error."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

MiB = 1 << 20
mode = sys.argv[1]
seen = []


def observer(device, alloc, total, free):
    node = torch._C._current_autograd_node()
    seen.append(node.name() if node is not None else None)


class Widen(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.repeat(8)[: g.numel()]  # BIG: 8x the gradient, more than the device has


torch.cuda.init()
torch._C._cuda_attach_out_of_memory_observer(observer)
w = torch.nn.Parameter(torch.ones(64 * MiB, device="cuda"))  # WEIGHT
raised = None
with torch.autograd.set_detect_anomaly(mode == "anomaly", check_nan=False):
    try:
        if mode == "forward":
            big = torch.empty(1024 * MiB, device="cuda")  # FORWARD_OOM
        if mode == "builtin":
            x = torch.ones(64 * MiB, device="cuda")
            h = torch.tanh(x * w)
            y = torch.sigmoid(h * w)  # MUL
        else:
            y = Widen.apply(w * 3)  # FWD
        y.sum().backward()
    except torch.OutOfMemoryError as e:
        raised = f"{type(e).__name__}: {e}"
print("TORCH " + json.dumps({"raised": raised, "nodes": seen}))
sys.exit(0)
