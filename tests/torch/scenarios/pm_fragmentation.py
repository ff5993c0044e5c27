"""A fragmentation failure inside PyTorch's segments.  Fills the
card with 20 MiB segments of alternating 4 MiB tensors, frees every other
one, then asks for a tensor larger than any hole (8 MiB, or argv[1] MiB).  The script's own
out-of-memory observer records memory_stats() at each failure: the
post-mortem's `allocator` must equal it to the byte."""
import json
import sys

import torch

MiB = 1 << 20
want = int(sys.argv[1]) if len(sys.argv) > 1 else 8
seen = []


def observer(device, alloc, device_total, device_free):
    s = torch.cuda.memory_stats(device)
    seen.append({k: s[k] for k in (
        "allocated_bytes.all.current", "reserved_bytes.all.current",
        "active_bytes.all.current", "inactive_split_bytes.all.current",
        "num_alloc_retries", "num_ooms")} | {"alloc": alloc, "segments": [
            [g["address"], g["total_size"],
             [[b["address"] - g["address"], b["size"], b["state"]] for b in g["blocks"]]]
            for g in sorted(torch.cuda.memory._snapshot()["segments"],
                            key=lambda g: g["address"]) if g["device"] == device]})


torch.cuda.init()
torch._C._cuda_attach_out_of_memory_observer(observer)
keep, drop = [], []
try:
    while True:
        keep.append(torch.empty(4 * MiB, dtype=torch.uint8, device="cuda"))
        drop.append(torch.empty(4 * MiB, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    pass
del drop
raised = False
try:
    big = torch.empty(want * MiB, dtype=torch.uint8, device="cuda")  # FRAGMENTED
except torch.OutOfMemoryError:
    raised = True
print("TORCH " + json.dumps({"raised": raised, "observed": seen}, sort_keys=True))
