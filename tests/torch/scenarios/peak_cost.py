"""The cost of the trace the peak's tensors replay (CUMEMTRACE_TORCH_PEAK=1:
layer/history.py's PEAK_MODE) against the default history (HISTORY_MODE),
on a training step of MODEL (as phases_cost.py builds them: mlp, gpt2),
the modes alternating in one process, ROUNDS blocks of N steps each, best
block of each.  On the simulated GPU kernels take no time: the step is all
Python, dispatch and allocator work, the worst case for a per-allocation
cost.  Prints one TORCH line: seconds a step per mode, ratios to "off".

    peak_cost.py TORCHBOOT_DIR MODEL [N] [ROUNDS]"""
import json
import os
import sys
import time

import torch

spec = __import__("importlib.util").util.spec_from_file_location(
    "cumemtrace_torch", os.path.join(sys.argv[1], "cumemtrace_torch.py"))
cumemtrace_torch = __import__("importlib.util").util.module_from_spec(spec)
spec.loader.exec_module(cumemtrace_torch)
history = cumemtrace_torch.part("history")

kind = sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 5
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 5
torch.manual_seed(0)
if kind == "gpt2":
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers
    config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=2048,
                                     n_positions=512, bos_token_id=0, eos_token_id=0)
    config._attn_implementation = "sdpa"
    model = transformers.GPT2LMHeadModel(config).cuda()
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


def block():
    t = time.perf_counter()
    for _ in range(N):
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / N


MODES = {"off": None, "state": history.HISTORY_MODE, "peak": history.PEAK_MODE}
block()
times = {m: [] for m in MODES}
for _ in range(ROUNDS):
    for name, mode in MODES.items():
        if mode is not None:
            torch.cuda.memory._record_memory_history(**mode)
        times[name].append(block())
        torch.cuda.memory._record_memory_history(enabled=None)
best = {m: min(t) for m, t in times.items()}
print("TORCH " + json.dumps({"model": kind, "step_s": best,
                             "ratio": {m: best[m] / best["off"] for m in MODES}}))
