"""Fragmentation that expandable segments cure.  Fills the card
with 4 MiB tensors (five to a 20 MiB segment), keeps the last of each even
segment and the first of each odd one, frees the rest, and asks for 24 MiB.
With PyTorch's default segments every free block ends at a segment's edge
(16 MiB at most): the request fails.  With
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True the segments are one
growing range, the 16 MiB tails and heads of neighbours join into 32 MiB
holes, and it fits."""
import json

import torch

MiB = 1 << 20
every = []
try:
    while True:
        every.append(torch.empty(4 * MiB, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    pass
kept = [t for i, t in enumerate(every) if i % 10 in (4, 5)]
del every
raised = False
try:
    big = torch.empty(24 * MiB, dtype=torch.uint8, device="cuda")  # WANTS_24
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "kept": len(kept)}, sort_keys=True))
