"""A matmul on the simulated GPU: cuBLAS and cuBLASLt are the stand-ins of
src/simgpu/blas (scripts/simgpu preloads them under NVIDIA's sonames), whose
kernels compute nothing.  PyTorch's own cuBLAS workspace comes from its
caching allocator for the duration of the call: its size is what PyTorch
picks for the device's compute capability (or CUBLAS_WORKSPACE_CONFIG),
measured here as the peak of a float64 matmul (cublasDgemm_v2) over what
was allocated before it."""
import json

import torch

a = torch.ones(64, 64, device="cuda", dtype=torch.float64)
error = None
torch.cuda.synchronize()
before = torch.cuda.memory_allocated()
torch.cuda.reset_peak_memory_stats()
try:
    c = a @ a
    torch.cuda.synchronize()
except RuntimeError as e:
    error = str(e).splitlines()[0]
workspace = torch.cuda.max_memory_allocated() - torch.cuda.memory_allocated()
b = (a * 2 + 1).sum()  # elementwise work goes on
print("TORCH " + json.dumps({"error": error, "reserved": torch.cuda.memory_reserved(),
                             "workspace": workspace,
                             "capability": list(torch.cuda.get_device_capability())}))
