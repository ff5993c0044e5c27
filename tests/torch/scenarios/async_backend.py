"""Scenario 5: PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync - every
tensor is a cudaMallocAsync from the device's default pool, whose
used/reserved attributes PyTorch reports."""
import ctypes
import json

import numpy  # noqa: F401 - as in any real environment: with it loaded,
# CPython's teardown frees the tensors kept to the end before Py_AtExit runs,
# so the exit snapshot must be taken at the script's end (Python's atexit)
import torch

MiB = 1 << 20
assert torch.cuda.get_allocator_backend() == "cudaMallocAsync"
kept = [torch.empty(n, dtype=torch.uint8, device="cuda")  # ALLOC
        for n in (512, 100_000, 3 * MiB, 30 * MiB + 3)]
for _ in range(5):
    tmp = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")  # TEMP
    del tmp
del kept[1]
# What is live at exit must still be live when the library writes the exit
# snapshot: interpreter shutdown frees module globals in an order that
# depends on what else is loaded (with numpy installed, before that
# snapshot), so the list keeps one reference for good.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(kept))
torch.cuda.synchronize()
stats = torch.cuda.memory_stats()
before_trim = torch.cuda.memory_reserved()
torch.cuda.empty_cache()
print("TORCH " + json.dumps({
    "allocated": torch.cuda.memory_allocated(),
    "max_allocated": torch.cuda.max_memory_allocated(),
    "reserved_before_trim": before_trim,
    "reserved": torch.cuda.memory_reserved(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "stats_allocated": stats.get("allocated_bytes.all.current"),
}, sort_keys=True))
