"""PyTorch's documented workflow: the program records its own allocation
history (every event, C++ and Python stacks) before CUDA starts, and reads
its own snapshot.  Under the tracer it must get the same trace: the layer
reads the program's history and never replaces its settings; when the
program turns history off and on again, that stands too."""
import json

import torch

torch.cuda.memory._record_memory_history()  # USER
a = torch.ones(1 << 20, device="cuda")  # KEEP
for i in range(3):
    b = a * i
    del b
s = torch.cuda.memory._snapshot()
first = [(e["action"], e["size"]) for e in s["device_traces"][0]]
torch.cuda.memory._record_memory_history(enabled=None)
c = torch.ones(1 << 18, device="cuda")
off = torch._C._cuda_isHistoryEnabled()
torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                         max_entries=7)
for i in range(5):
    d = a + i
    del d
s = torch.cuda.memory._snapshot()
second = [(e["action"], e["size"]) for e in s["device_traces"][0]]
print("TORCH " + json.dumps({"first": first, "off": off, "second": second}))
