"""Scenario 4: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True - segments
grown by cuMemCreate + cuMemMap inside one cuMemAddressReserve per pool -
and, with --oom, an OutOfMemoryError at cuMemCreate."""
import json
import sys

import torch

MiB = 1 << 20
kept = [torch.empty(n, dtype=torch.uint8, device="cuda")  # ALLOC
        for n in (100_000, 700_000, 3 * MiB, 30 * MiB, 70 * MiB + 7)]
del kept[2]
raised = False
if "--oom" in sys.argv:
    try:
        # more than is free, less than one segment's address range (1.125 x total)
        free = torch.cuda.mem_get_info()[0]
        big = torch.empty(free // (2 * MiB) * (2 * MiB) + 64 * MiB,  # OOM
                          dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        raised = True
stats = torch.cuda.memory_stats()
print("TORCH " + json.dumps({
    "raised": raised,
    "reserved": torch.cuda.memory_reserved(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "allocated": torch.cuda.memory_allocated(),
    "num_alloc_retries": stats["num_alloc_retries"],
    "total": torch.cuda.get_device_properties(0).total_memory,
}, sort_keys=True))
