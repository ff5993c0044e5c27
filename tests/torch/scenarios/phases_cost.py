"""The cost of PyTorch's phases (make bench: scripts/bench_torch_phases.py):
a real model's training step on the simulated GPU, where kernels take no
time, so the step is all Python, dispatch and allocator work: the worst
case for a Python call per module call.  MODEL:
  mlp   8 x (nn.Linear(512, 512), ReLU), 17 module calls a step, AdamW,
        batch 64
  gpt2  a GPT-2-shaped transformer (transformers' GPT2LMHeadModel from a
        config, random weights, fp32, SDPA; the shape of model_hf.py) with
        AdamW, batch 4 x 256 tokens

  phases_cost.py MODEL wall N R     best and median microseconds a step
                                    over R blocks of N steps
  phases_cost.py MODEL instr N LIB  N steps between LIB's callgrind client
                                    requests (tests/bench/cg_requests.c):
                                    only they are counted, on every thread
Prints one COST line (with the module calls a step)."""
import ctypes
import json
import os
import statistics
import sys
import time

import torch

kind, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(0)
if kind == "gpt2":
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is fetched: the config is here
    import transformers
    config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=2048,
                                     n_positions=512)
    config._attn_implementation = "sdpa"
    model = transformers.GPT2LMHeadModel(config).cuda()
    model.train()
    ids = torch.randint(0, config.vocab_size, (4, 256), device="cuda")

    def loss():
        return model(input_ids=ids, labels=ids).loss
else:
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    x = torch.randn(64, 512, device="cuda")

    def loss():
        return model(x).sum()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def step():
    opt.zero_grad(set_to_none=True)
    loss().backward()
    opt.step()


for _ in range(5):
    step()
torch.cuda.synchronize()
calls = [0]
counter = torch.nn.modules.module.register_module_forward_pre_hook(
    lambda m, a: calls.__setitem__(0, calls[0] + 1))
step()
counter.remove()
if mode == "wall":
    per = []
    for _ in range(int(sys.argv[4])):
        t = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t) / n * 1e6)
    print("COST " + json.dumps({"best_us": min(per), "median_us": statistics.median(per),
                                "module_calls": calls[0]}))
else:
    mark = ctypes.CDLL(sys.argv[4])
    mark.cg_start()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    mark.cg_stop(b"steps")
    print("COST " + json.dumps({"steps": n, "module_calls": calls[0]}))
