"""scripts/simgpu: the simulated runtime goes first in LD_PRELOAD, except
that a sanitizer runtime stays in front (an instrumented build refuses to
start otherwise: make test-san runs PyTorch through simgpu)."""
import os
import subprocess

from conftest import ROOT, SAN_RUNTIME, SIM, base_env

SIMGPU = ROOT / "scripts" / "simgpu"
# the runtime first, then the stand-ins for NVIDIA's libraries (src/simgpu)
STANDINS = ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9",
            "libnccl.so.2"]


def test_simgpu_keeps_a_sanitizer_runtime_first():
    # a real runtime under test-san (the instrumented simulator needs it),
    # else a path ld.so ignores with a warning
    san = SAN_RUNTIME or "/nonexistent/libasan.so.8"
    env = base_env({"LD_PRELOAD": f"liba.so {san}:libb.so"}, preload=False)
    env["CUMEMTRACE_BUILD"] = str(SIM.parent)
    r = subprocess.run([str(SIMGPU), "--", "sh", "-c", 'echo "$LD_PRELOAD"'], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    sim = os.path.realpath(SIM)
    ours = ":".join(f"{sim}/{f}" for f in STANDINS if os.path.exists(f"{sim}/{f}"))
    assert STANDINS[1] in ours, ours  # the stand-ins are built with the device
    assert r.stdout.strip() == f"{san}:{ours}:liba.so:libb.so"

