"""A CNN with BatchNorm trained with SGD: convolutions through the cuDNN
graph API (or PyTorch's own kernels and cuBLAS with cuDNN off: argv[1]
"off"), BatchNorm through cudnnBatchNormalizationForwardTrainingEx.
Prints PyTorch's own peak figures."""
import json
import sys

import torch
import settle  # noqa: E402,F401 (PyTorch's exit race after backward())

torch.backends.cudnn.enabled = not (len(sys.argv) > 1 and sys.argv[1] == "off")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
    torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(2):
    x = torch.randn(32, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("TORCH " + json.dumps({
    "cudnn": torch.backends.cudnn.enabled,
    "cudnn_version": torch.backends.cudnn.version(),
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.max_memory_reserved(),
    "reserved": torch.cuda.memory_reserved(),
}, sort_keys=True))
