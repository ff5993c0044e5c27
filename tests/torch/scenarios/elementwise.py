"""The model several scenarios train (train_adam.py, train_killed.py,
dump_midrun.py, history_cost.py): elementwise layers, x = tanh(x * w + b)
per layer, so a step holds parameters, activations kept for backward,
autograd's gradients and an optimizer's state, and no kernel takes time on
the simulated GPU."""
import torch


class Elementwise(torch.nn.Module):
    """`layers` layers of n-element weights (ones) and, with `bias`, biases
    (zeros), all on the GPU; the weights are registered first."""

    def __init__(self, layers, n, bias=True):
        super().__init__()
        self.w = torch.nn.ParameterList(
            torch.nn.Parameter(torch.ones(n, device="cuda")) for _ in range(layers))
        self.b = torch.nn.ParameterList(
            torch.nn.Parameter(torch.zeros(n, device="cuda"))
            for _ in range(layers if bias else 0))

    def forward(self, x):
        if not self.b:
            for w in self.w:
                x = torch.tanh(x * w)
            return x
        for w, b in zip(self.w, self.b):
            x = torch.tanh(x * w + b)
        return x
