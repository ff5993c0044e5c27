"""FSDP2 (torch.distributed.fsdp.fully_shard) over NCCL: run by torchrun,
one process per rank, each on its own simulated device (LOCAL_RANK).  A
GPT-2-shaped model from a transformers config (random weights, small),
each block sharded, then the whole model; AdamW; a few steps.  Each rank
prints its own PyTorch figures as one line "RANK_FIGURES {...}", for
`cumemtrace fit --nproc` to be judged against.

argv: steps (2), batch (4)"""
import json
import os
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import GPT2Config, GPT2LMHeadModel

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 4
rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")

cfg = GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=8000, n_positions=256)
torch.manual_seed(0)  # the same weights on every rank before sharding
model = GPT2LMHeadModel(cfg).cuda()
for block in model.transformer.h:
    fully_shard(block)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.zeros(batch, 256, dtype=torch.long, device="cuda")
for _ in range(steps):
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
dist.barrier(device_ids=[local])
s = torch.cuda.memory_stats()
print("RANK_FIGURES " + json.dumps({
    "rank": rank, "max_allocated": s["allocated_bytes.all.peak"],
    "max_reserved": s["reserved_bytes.all.peak"]}), flush=True)
dist.destroy_process_group()
