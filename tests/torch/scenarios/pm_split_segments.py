"""Two segments, each split into a live tensor and a free block, then a
request larger than either free block but smaller than both together: with
PyTorch's default allocator an allocator_fragmentation failure (a 1 GiB card
nearly full), with expandable_segments:True the same script runs to the end."""
import json

import torch

MiB = 1 << 20


def empty(mib):
    return torch.empty(mib * MiB, dtype=torch.uint8, device="cuda")


torch.cuda.init()
live = []
for _ in range(2):
    seg = empty(300)     # a 300 MiB segment of its own ...
    del seg
    live.append(empty(200))  # ... split: 200 MiB live, 100 MiB free
live.append(empty(420))  # fills the card (the free blocks are too small for it)
raised = False
try:
    big = empty(150)  # SPLIT
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised,
                             "reserved": torch.cuda.memory_reserved(),
                             "allocated": torch.cuda.memory_allocated()}, sort_keys=True))
