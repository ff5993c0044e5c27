"""The peak's tensors when the peak is older than PyTorch's trace reaches
(the test runs it with a short trace, CUMEMTRACE_TORCH_PEAK_ENTRIES): a
small Linear trained with SGD, STEPS steps; one step also holds a 64 MiB
tensor on top of the step's own (more than cuBLAS's 32 MiB workspace in
backward), the run's max_memory_allocated, where
PyTorch's own snapshot is dumped (peak_snapshot.pickle) as the truth.
argv[1] "old": step 1 holds BIG; the steps after it push it out of the
trace.  "reset": step 1 holds BIG, then reset_peak_memory_stats, step 2
holds OTHER (the same size, another line): the peak is step 2's.  At the
peak the parameters' gradients, made in backward, are live: their storages'
addresses go to peak_grads.json (not stdout: the bare and traced runs must
print the same)."""
import json
import sys

import torch

import settle  # noqa: F401 (PyTorch's exit race after backward())

N = 1 << 20
STEPS = 40
mode = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Linear(64, 64).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(32, 64, device="cuda")


def big():
    return torch.ones(16 * N, device="cuda")  # BIG


def other():
    return torch.ones(16 * N, device="cuda")  # OTHER


def train(extra=None, truth=False):
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    if extra is not None:
        t = extra()
        if truth:  # the peak's moment: PyTorch's own account of it
            torch.cuda.memory._dump_snapshot("peak_snapshot.pickle")
            with open("peak_grads.json", "w") as f:
                json.dump([p.grad.untyped_storage().data_ptr()
                           for p in model.parameters()], f)
        del t
    opt.step()


train(big, truth=mode == "old")
first = torch.cuda.max_memory_allocated()
if mode == "reset":
    torch.cuda.reset_peak_memory_stats()
    train(other, truth=True)
for _ in range(STEPS):
    train()
print("TORCH " + json.dumps({"max_allocated": torch.cuda.max_memory_allocated(),
                             "first_max": first, "steps": STEPS + 1 + (mode == "reset")}))
