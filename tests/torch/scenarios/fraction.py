"""Scenario 6: torch.cuda.set_per_process_memory_fraction - PyTorch refuses
a request above its share of the card without calling CUDA."""
import json

import torch

MiB = 1 << 20
total = torch.cuda.get_device_properties(0).total_memory
sizes = {"kept": total * 18 // 100 // (2 * MiB) * (2 * MiB),   # 18% of the card
         "more": total * 12 // 100 // (2 * MiB) * (2 * MiB)}   # then 12% more: above 25%
torch.cuda.set_per_process_memory_fraction(0.25)
kept = torch.empty(sizes["kept"], dtype=torch.uint8, device="cuda")
message = None
try:
    more = torch.empty(sizes["more"], dtype=torch.uint8, device="cuda")  # REFUSED
except torch.OutOfMemoryError as e:
    message = str(e).splitlines()[0]
stats = torch.cuda.memory_stats()
free, total = torch.cuda.mem_get_info()
print(message)
print("TORCH " + json.dumps({
    "raised": message is not None,
    "sizes": sizes,
    "reserved": torch.cuda.memory_reserved(),
    "num_ooms": stats["num_ooms"],
    "num_alloc_retries": stats["num_alloc_retries"],
    "segments_allocated": stats["segment.all.allocated"],
    "free": free, "total": total,
}, sort_keys=True))
