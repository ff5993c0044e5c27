"""A retry chain that recovers - PyTorch frees its cached
segments and the retried cudaMalloc succeeds: routine, so no post-mortem."""
import json

import torch

MiB = 1 << 20
kept = torch.empty(500 * MiB, dtype=torch.uint8, device="cuda")
cached = torch.empty(400 * MiB, dtype=torch.uint8, device="cuda")
del cached  # stays in PyTorch's cache
big = torch.empty(450 * MiB, dtype=torch.uint8, device="cuda")  # RECOVERS
s = torch.cuda.memory_stats()
print("TORCH " + json.dumps({"retries": s["num_alloc_retries"], "ooms": s["num_ooms"]},
                            sort_keys=True))
