"""The program records its own history, a dump is taken (cumemtrace_dump,
when traced), then the program turns its history off: the exit snapshot
must not carry the dump's reading as its own - no history, no tensors."""
import ctypes
import json

import torch

torch.cuda.memory._record_memory_history()
a = torch.ones(1 << 20, device="cuda")  # KEEP
dump = getattr(ctypes.CDLL(None), "cumemtrace_dump", None)
if dump is not None:  # traced
    dump(b"cumemtrace.api.json")
torch.cuda.memory._record_memory_history(enabled=None)
b = torch.ones(1 << 20, device="cuda")
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated()}))
