"""DistributedDataParallel over NCCL: run by torchrun, one process per rank,
each on its own simulated device (LOCAL_RANK).  A small MLP - with a layer
that forward never uses under find_unused_parameters=True, so that the
reducer's search for unused parameters has work to do - trained a few steps
with small buckets, so that the reducer makes several.
Each rank's own memory figures are gathered on rank 0 through a gloo group
(real CPU-side messages) and printed as one TORCH line.

argv: steps (3), find_unused ("unused" or "static")"""
import json
import os
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
find_unused = (sys.argv[2] if len(sys.argv) > 2 else "unused") == "unused"
rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
gloo = dist.new_group(backend="gloo")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(256, 1024)
        self.b = torch.nn.Linear(1024, 256)
        if find_unused:  # without find_unused_parameters DDP refuses it, as on a GPU
            self.unused = torch.nn.Linear(256, 256)  # never in forward

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


torch.manual_seed(0)  # the same weights on every rank, as DDP expects
net = Net().cuda()
model = DDP(net, device_ids=[local], bucket_cap_mb=0.25, find_unused_parameters=find_unused)  # DDP
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(steps):
    x = torch.randn(32, 256, device="cuda")
    loss = model(x).square().mean()  # FORWARD
    loss.backward()  # BACKWARD
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
dist.barrier(device_ids=[local])
s = torch.cuda.memory_stats()
log = model._get_ddp_logging_data()
# DDP rebuilds its buckets in the order gradients became ready, in the
# second forward; the final ones are what the reducer holds
rebuilt = bool(log.get("has_rebuilt_buckets"))
sizes = log.get("rebuilt_bucket_sizes" if rebuilt else "bucket_sizes")
mine = {
    "rank": rank,
    "device": torch.cuda.current_device(),
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "reserved": torch.cuda.memory_reserved(),
    "allocated": torch.cuda.memory_allocated(),
    "stats_peak_allocated": s["allocated_bytes.all.peak"],
    "stats_peak_reserved": s["reserved_bytes.all.peak"],
    "segments_allocated": s["segment.all.allocated"],
    "nccl_version": list(torch.cuda.nccl.version()),
    "world_size": dist.get_world_size(),
    "find_unused": find_unused,
    "steps": steps,
    "buckets": [int(b) for b in sizes.split(",")],
    "rebuilt": rebuilt,
}
every = [None] * dist.get_world_size()
dist.all_gather_object(every, mine, group=gloo)
if rank == 0:
    print("TORCH " + json.dumps({"ranks": every}, sort_keys=True), flush=True)
dist.destroy_process_group()
