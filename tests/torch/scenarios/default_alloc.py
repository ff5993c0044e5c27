"""Scenario 1: PyTorch's default caching allocator - tensors below 1 MiB,
of 1-10 MiB and large, frees, empty_cache - and its own accounting."""
import json

import torch

MiB = 1 << 20
SIZES = [512, 3000, 200_000, 900_000,            # small pool: 2 MiB segments
         3 * MiB, 7 * MiB, 9 * MiB + 5,          # large pool: 20 MiB segments
         33 * MiB, 150 * MiB + 1]                # large: their own segment

assert torch.cuda.is_available()
kept = []
for n in SIZES:
    kept.append(torch.empty(n, dtype=torch.uint8, device="cuda"))  # ALLOC
peak_reserved = torch.cuda.max_memory_reserved()
del kept[1::2]
torch.cuda.empty_cache()
extra = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")  # AFTER
stats = torch.cuda.memory_stats()
print("TORCH " + json.dumps({
    "version": torch.__version__,
    "cuda": torch.version.cuda,
    "peak_reserved": peak_reserved,
    "max_reserved": torch.cuda.max_memory_reserved(),
    "reserved": torch.cuda.memory_reserved(),
    "allocated": torch.cuda.memory_allocated(),
    "segments_allocated": stats["segment.all.allocated"],
    "segments_freed": stats["segment.all.freed"],
    "num_alloc_retries": stats["num_alloc_retries"],
}, sort_keys=True))
