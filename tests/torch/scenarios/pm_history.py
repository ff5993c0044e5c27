"""CUMEMTRACE_TORCH_HISTORY=1 - the post-mortem names the Python
lines holding the largest live tensors (PyTorch's own allocation history).
Three 64 MiB weights from one line, 200 MiB of activations from another,
then a request the 1 GiB card cannot hold."""
import json

import torch

MiB = 1 << 20


def weights():
    return [torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")  # WEIGHTS
            for _ in range(3)]


w = weights()
acts = torch.empty(200 * MiB, dtype=torch.uint8, device="cuda")  # ACTS
raised = False
try:
    big = torch.empty(2048 * MiB, dtype=torch.uint8, device="cuda")  # TOO_BIG
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "allocated": torch.cuda.memory_allocated()},
                            sort_keys=True))
