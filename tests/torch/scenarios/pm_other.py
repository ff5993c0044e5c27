"""Another process holds device memory and this one runs out.
Shares the simulated device with a second process through its own
SIMCUDA_SHARED file (so the bare and the traced run each have their own
device), starts that process holding argv[1] bytes (0: none), then keeps
1 GiB and asks for 1.5 GiB more."""
import json
import os
import subprocess
import sys
import tempfile

fd, shared = tempfile.mkstemp(prefix="cumemtrace-shared-")
os.close(fd)
os.environ["SIMCUDA_SHARED"] = shared  # before the first CUDA call: the driver reads it then

import torch  # noqa: E402

GiB = 1 << 30
held = int(sys.argv[1])
HOLDER = """
import ctypes, sys
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(int(sys.argv[1]))) == 0
print("held", flush=True)
sys.stdin.read()
"""
other = None
if held:
    other = subprocess.Popen([sys.executable, "-c", HOLDER, str(held)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline() == "held\n"
kept = torch.empty(GiB, dtype=torch.uint8, device="cuda")
raised = False
try:
    big = torch.empty(GiB + GiB // 2, dtype=torch.uint8, device="cuda")  # WANTS
except torch.OutOfMemoryError:
    raised = True
if other is not None:
    other.stdin.close()
    other.wait()
os.unlink(shared)
print("TORCH " + json.dumps({"raised": raised, "held": held}, sort_keys=True))
