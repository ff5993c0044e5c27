"""train_torch.py - a real PyTorch training loop whose GPU memory grows with
--batch: elementwise layers (no matmul, so it also runs on the simulated
GPU, where cuBLAS cannot), autograd, Adam.  `make demo` runs it under
cumemtrace on a simulated 24 GiB card at a batch that fits and one that
does not.

    scripts/simgpu --memory 24GiB -- build/cumemtrace run -- \\
        python examples/train_torch.py --batch 64
"""
import argparse

import torch

WIDTH = 1 << 20  # features per sample


class Block(torch.nn.Module):
    """y = tanh(x * w + b) * gate(x): three activations kept for backward."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(WIDTH))
        self.b = torch.nn.Parameter(torch.zeros(WIDTH))
        self.g = torch.nn.Parameter(torch.full((WIDTH,), 0.5))

    def forward(self, x):
        h = torch.tanh(x * self.w + self.b)
        return h * torch.sigmoid(x * self.g)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()

    model = torch.nn.Sequential(*(Block() for _ in range(args.layers))).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    for step in range(args.steps):
        x = torch.randn(args.batch, WIDTH, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # (No loss value: the simulated GPU computes nothing, it reads zeros.)
        print(f"step {step}: reserved {torch.cuda.memory_reserved() / 2**30:.2f} GiB, "
              f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB",
              flush=True)


if __name__ == "__main__":
    main()
