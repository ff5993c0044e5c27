"""A training loop of 20 steps whose memory_stats() calls are counted (the
program wraps torch.cuda.memory.memory_stats, which memory_allocated() and
max_memory_allocated() call): the program itself never calls it, so bare
it prints 0; traced it must print 0 too - the layer's reading at each step's
end (growth by line, the peak's step) reads PyTorch's counters without
memory_stats(), which flattens and sorts every counter in Python at about
40 allocations' worth of CPU, each step.  With argv[1] "raw" it counts
PyTorch's raw counters (torch._C._cuda_memoryStats) too, which the layer
reads at a step's end only when it has a reading to take: with its history
off (CUMEMTRACE_TORCH_HISTORY=0) and no peak to follow, none.  With argv[1]
"steady" it counts the raw counters' reads apart, on stderr (stdout stays
the bare run's): memory that stands still after the first steps is read at
ever longer intervals, not at every step's end."""
import json
import sys

import torch
import settle  # noqa: F401 (PyTorch's exit race after backward())

calls = [0]
orig = torch.cuda.memory.memory_stats


def counted(*args, **kwargs):
    calls[0] += 1
    return orig(*args, **kwargs)


torch.cuda.memory.memory_stats = counted
raw_reads = [0]
if sys.argv[1:] == ["steady"]:
    # PyTorch's raw counters, counted apart and told on stderr: traced they
    # are read, bare not, and stdout must be the same
    raw_steady = torch._C._cuda_memoryStats

    def counted_steady(*args, **kwargs):
        raw_reads[0] += 1
        return raw_steady(*args, **kwargs)
    torch._C._cuda_memoryStats = counted_steady
if sys.argv[1:] == ["raw"]:
    raw = torch._C._cuda_memoryStats

    def counted_raw(*args, **kwargs):
        calls[0] += 1
        return raw(*args, **kwargs)
    torch._C._cuda_memoryStats = counted_raw
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 256)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(32, 256, device="cuda")
for _ in range(20):
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()
torch.cuda.synchronize()
if sys.argv[1:] == ["steady"]:
    sys.stderr.write("RAW_READS %d\n" % raw_reads[0])
print("TORCH " + json.dumps({"memory_stats_calls": calls[0], "steps": 20}))
