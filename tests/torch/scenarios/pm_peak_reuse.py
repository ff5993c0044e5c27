"""The peak's tensors are not the lines that created the cached segments:
FREED creates two 20 MiB segments and frees its tensors; REUSED takes the
same cached blocks; SMALL raises max_memory_allocated past them.  The line
that created most of the segments at the peak holds nothing there.
argv[1]: SMALL's size in MiB (1: from the small pool; 2 or more: a
segment of the large pool)."""
import json
import sys

import torch

MiB = 1 << 20
a = [torch.empty(5 * MiB, dtype=torch.uint8, device="cuda") for _ in range(8)]  # FREED
del a
b = [torch.empty(5 * MiB, dtype=torch.uint8, device="cuda") for _ in range(8)]  # REUSED
small = int(sys.argv[1]) if len(sys.argv) > 1 else 1
c = torch.empty(small * MiB, dtype=torch.uint8, device="cuda")  # SMALL
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated(),
                             "reserved": torch.cuda.memory_reserved(),
                             "max_allocated": torch.cuda.max_memory_allocated()},
                            sort_keys=True))
