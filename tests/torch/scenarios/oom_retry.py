"""Scenario 3: a real torch.OutOfMemoryError raised by PyTorch on the
simulated card (SIMCUDA_MEMORY), after its caching allocator released its
cached segments and retried."""
import json
import re

import torch

MiB = 1 << 20
# Sized from what is free (the simulated 2 GiB card: 900, 600 and 1200 MiB;
# a real card alike): both tensors fit, then the big one fits neither with
# the cached segment nor without it.
free0 = torch.cuda.mem_get_info()[0]
sizes = {k: free0 * n // 2048 // (2 * MiB) * (2 * MiB)
         for k, n in (("kept", 900), ("cached", 600), ("big", 1200))}
kept = torch.empty(sizes["kept"], dtype=torch.uint8, device="cuda")
cached = torch.empty(sizes["cached"], dtype=torch.uint8, device="cuda")
del cached  # its segment stays cached by PyTorch
message = None
try:
    big = torch.empty(sizes["big"], dtype=torch.uint8, device="cuda")  # OOM
except torch.OutOfMemoryError as e:
    message = str(e)
stats = torch.cuda.memory_stats()
free, total = torch.cuda.mem_get_info()
m = re.search(r"Tried to allocate (\S+ \S+)\. GPU 0 has a total capacity of (\S+ \S+) of which "
              r"(\S+ \S+) is free\..*?(\S+ \S+) is allocated by PyTorch, and (\S+ \S+) is "
              r"reserved by PyTorch but unallocated", message or "", re.S)
print(message.splitlines()[0] if message else "no OOM")
print("TORCH " + json.dumps({
    "raised": message is not None,
    "sizes": sizes,
    # PyTorch's message, as it printed the figures (format_size)
    "msg": dict(zip(("tried", "total", "free", "allocated", "unallocated"),
                    m.groups())) if m else None,
    "num_alloc_retries": stats["num_alloc_retries"],
    "num_ooms": stats["num_ooms"],
    "reserved": torch.cuda.memory_reserved(),
    "allocated": torch.cuda.memory_allocated(),
    "segments_freed": stats["segment.all.freed"],
    "free": free, "total": total,
}, sort_keys=True))
