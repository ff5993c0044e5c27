"""Torch.cuda.set_per_process_memory_fraction refuses a request
by itself (no CUDA call fails): only PyTorch's observer sees it.  The
second request is 200 MiB, or argv[1] MiB."""
import json
import sys

import torch

MiB = 1 << 20
more = int(sys.argv[1]) if len(sys.argv) > 1 else 200
torch.cuda.set_per_process_memory_fraction(0.25)
total = torch.cuda.get_device_properties(0).total_memory
a = torch.empty(200 * MiB, dtype=torch.uint8, device="cuda")
raised = False
try:
    b = torch.empty(more * MiB, dtype=torch.uint8, device="cuda")  # CAPPED
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "total": total,
                             "reserved": torch.cuda.memory_reserved()}, sort_keys=True))
