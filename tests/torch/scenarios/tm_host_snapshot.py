"""A program that reads PyTorch's memory snapshot itself
(torch.cuda.memory._snapshot()), then records its own history and reads it
again.  What it saw goes to host_view.json in the working directory, not
to stdout: under the tracer it differs (docs/pytorch.md, "The program's own
snapshot"), and the bare and traced runs must print the same."""
import json

import torch


def seen():
    s = torch.cuda.memory._snapshot()
    blocks = [b for seg in s["segments"] for b in seg["blocks"]
              if b["state"] == "active_allocated"]
    trace = [e for t in s["device_traces"] for e in t]
    return {"blocks": len(blocks), "blocks_with_frames": sum(1 for b in blocks if b.get("frames")),
            "trace": len(trace), "allocated": sum(b["size"] for b in blocks)}


x = torch.ones(1 << 20, device="cuda")  # BEFORE
first = seen()
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                         max_entries=100000)
y = torch.ones(1 << 20, device="cuda")  # OWN
own = seen()
own_trace = [e for t in torch.cuda.memory._snapshot()["device_traces"] for e in t]
own["trace_actions"] = sorted({e["action"] for e in own_trace})
own["trace_frees_with_frames"] = sum(1 for e in own_trace
                                     if e["action"] == "free_requested" and e.get("frames"))
with open("host_view.json", "w") as f:
    json.dump({"first": first, "own": own}, f)
print("TORCH " + json.dumps({"allocated": torch.cuda.memory_allocated()}))
