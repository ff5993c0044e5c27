"""What is live at exit is split into tensors and PyTorch's cache."""
import json

import torch

MiB = 1 << 20
kept = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")  # KEPT
tmp = [torch.empty(4 * MiB, dtype=torch.uint8, device="cuda") for _ in range(10)]
del tmp
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "reserved": torch.cuda.memory_reserved()}, sort_keys=True))
