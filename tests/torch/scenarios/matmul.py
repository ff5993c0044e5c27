"""The simulator's limit: cuBLAS (like cuDNN, NCCL, cuFFT) carries NVIDIA's
own static runtime, which cannot start on the simulated driver.  A matmul
must fail with PyTorch's error, not crash or hang - and elementwise work
goes on afterwards."""
import json

import torch

a = torch.ones(64, 64, device="cuda")
error = None
try:
    (a @ a).sum().item()
except RuntimeError as e:
    error = str(e).splitlines()[0]
b = (a * 2 + 1).sum()  # elementwise still works
print("TORCH " + json.dumps({"error": error, "reserved": torch.cuda.memory_reserved()}))
