"""Liger-Kernel's plain-PyTorch memory baselines, the same work in the same
order as its benchmark harness did it (linkedin/Liger-Kernel,
benchmark/scripts/benchmark_cross_entropy.py and benchmark_layer_norm.py
with utils.py's _test_memory, versions of 2024): for each point, fresh
tensors, then ITERS times reset_peak_memory_stats(), forward + backward
with retain_graph, max_memory_allocated() in MiB.  The median of the
iterations is what the harness published (y_value_50).

usage: liger_baselines.py KERNEL X [X ...]
  cross_entropy: X is the vocabulary V; logits (B*T, V) fp32, B 8, T 2048
  layer_norm:    X is the hidden size N; input (M, N) fp32, M 4096
  megatron_cross_entropy: X is the vocabulary V; the "torch" provider of
                 benchmark_megatron_cross_entropy.py (2026): logits (S, B, V)
                 bf16, S 2048, B 4, cast to fp32 for F.cross_entropy
                 (reduction "none"), then y.sum().backward()
Prints one line "LIGER {"X": MiB, ...}"."""
import json
import statistics
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

ITERS = 10  # the harness's _iter


def peak(full):
    mem = []
    for _ in range(ITERS):
        torch.cuda.memory.reset_peak_memory_stats()
        full()
        mem.append(torch.cuda.max_memory_allocated() / 2**20)
    return statistics.median(mem)


def cross_entropy(V, B=8, T=2048):
    ce = torch.nn.CrossEntropyLoss()
    x = torch.randn(B * T, V, requires_grad=True, device="cuda")
    target = torch.randint(V, (B * T, 1), device="cuda").squeeze(1)

    def full():
        y = ce(x, target)
        y.backward(retain_graph=True)
    return peak(full)


def layer_norm(N, M=4096, eps=1e-6):
    # the harness builds Liger's module beside torch's even when it measures
    # torch's: its weight and bias are the same sizes as a LayerNorm's
    _beside = torch.nn.LayerNorm(N, eps=eps).to("cuda")
    ln = torch.nn.LayerNorm(N, eps=eps).to("cuda")
    x = torch.randn(M, N, device="cuda")
    dy = torch.randn_like(x)
    x.requires_grad_(True)

    def full():
        y = ln(x)
        y.backward(dy, retain_graph=True)
    return peak(full)


def megatron_cross_entropy(V, S=2048, B=4):
    # no retain_graph: each iteration builds its graph anew, and the logits'
    # bf16 gradient, made by the first, is held by the rest
    logits = torch.randn(S, B, V, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, V, (S, B), device="cuda", dtype=torch.long)

    def full():
        y = torch.nn.functional.cross_entropy(logits.reshape(-1, V).float(), target.reshape(-1),
                                              reduction="none").reshape(S, B)
        y.sum().backward()
    return peak(full)


KERNELS = {"cross_entropy": cross_entropy, "layer_norm": layer_norm,
           "megatron_cross_entropy": megatron_cross_entropy}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in KERNELS:
        sys.exit(__doc__.split("\n\n")[1])
    kernel = KERNELS[sys.argv[1]]
    out = {}
    for x in sys.argv[2:]:
        out[x] = kernel(int(x))
    print("LIGER " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
