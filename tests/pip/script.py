"""Real PyTorch on the simulated GPU, run by tests/pip/test_pip.py under the
installed `cumemtrace run`: two tensors kept to the end, then PyTorch's own
figures and any libunwind this process mapped, as one JSON line."""
import json

import torch

MiB = 1 << 20
assert torch.cuda.is_available()
small = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")  # @small
large = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")  # @large
with open("/proc/self/maps") as f:
    unwind = sorted({line.split()[-1] for line in f if "libunwind" in line})
print("TORCH " + json.dumps({
    "max_reserved": torch.cuda.max_memory_reserved(),
    "allocated": torch.cuda.memory_allocated(),
    "unwind": unwind,
}))
