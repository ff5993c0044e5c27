"""GPT-2 training steps on random tokens, for `cumemtrace fit` (README, docs/simgpu.md).

    cumemtrace fit --gpu l4 --gpu a100-40gb -- python examples/gpt2_fit.py --batch 8
    python examples/gpt2_fit.py --memtracker     # PyTorch's MemTracker estimate beside

The model is built from a config with random weights: nothing is downloaded
(GPT-2 small's shape by default: 12 layers, 768 wide, 124 M parameters).
--memtracker wraps the steps in torch.distributed._tools.mem_tracker.MemTracker
and prints its peak estimate next to PyTorch's own max_memory_allocated and
max_memory_reserved (docs/simgpu.md has the side-by-side table).
"""
import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=1024)
ap.add_argument("--layers", type=int, default=12)
ap.add_argument("--width", type=int, default=768)
ap.add_argument("--steps", type=int, default=2, help="memory peaks in the first steps")
ap.add_argument("--checkpointing", action="store_true", help="activation checkpointing")
ap.add_argument("--memtracker", action="store_true", help="print MemTracker's estimate too")
args = ap.parse_args()

config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.width,
                                 n_head=max(1, args.width // 64), n_positions=args.seq)
config._attn_implementation = "sdpa"
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(config).cuda()
if args.checkpointing:
    model.gradient_checkpointing_enable()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)


def steps(after_each=None):
    for _ in range(args.steps):
        ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device="cuda")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if after_each is not None:
            after_each()


if args.memtracker:
    from torch.distributed._tools.mem_tracker import MemTracker
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:  # it refuses a second step's modules without a reset
        steps(tracker.reset_mod_stats)
    peak = tracker.get_tracker_snapshot("peak")
    estimate = sum(v.get("Total", 0) for k, v in peak.items() if str(k).startswith("cuda"))
    print(f"MemTracker peak estimate: {estimate / 2**20:.0f} MiB")
else:
    steps()
torch.cuda.synchronize()
print(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M")
print(f"max_memory_allocated: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
print(f"max_memory_reserved: {torch.cuda.max_memory_reserved() / 2**20:.0f} MiB")
