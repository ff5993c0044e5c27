#!/usr/bin/env python3
"""bench_torch_frames.py - how many of a PyTorch loop's allocations carry the
script's Python frames.

Real PyTorch (scripts/torch-env.sh's venv) on the simulated GPU
(scripts/simgpu), under `cumemtrace run`, with PYTORCH_NO_CUDA_MEMORY_CACHING=1
so every tensor is a cudaMalloc: STEPS steps of elementwise forward work
(PyTorch releases the GIL around each op, so these captures are made
without it; no backward pass: autograd's own threads have no Python
frames by design).  Counted from the exit snapshot's churn rows, which hold
every allocation of the run per stack: the share of allocations whose
stack has a Python frame of the loop's script.

    scripts/bench_torch_frames.py --build build [--steps 1000]

Prints key=value lines: allocations=N, with_script_frames=N, share=F.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

from benchlib import clean_env, torch_python

HERE = os.path.dirname(os.path.abspath(__file__))

LOOP = """
import sys, torch
steps = int(sys.argv[1])
x = torch.ones(256, 256, device="cuda")
def layer(t, i):
    return (t * 0.5 + i).relu()
def step(i):
    y = layer(x, i)
    y = layer(y, i) * x
    return float(y.sum())
for i in range(steps):
    step(i)
print("done")
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=1000)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    py = torch_python(create=True)
    if not py or not os.path.exists(py):
        sys.exit("bench_torch_frames: no PyTorch venv (scripts/torch-env.sh)")
    tmp = tempfile.mkdtemp(prefix="cumemtrace-bench-torch-")
    script = os.path.join(tmp, "loop.py")
    with open(script, "w") as f:
        f.write(LOOP)
    env = clean_env()
    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    r = subprocess.run([os.path.join(HERE, "simgpu"), "--build", build, "--memory", "24GiB",
                        "--", os.path.join(build, "cumemtrace"), "run", "--output",
                        tmp + "/", "--", py, script, str(a.steps)],
                       env=env, capture_output=True, text=True, timeout=1800)
    snaps = [f for f in glob.glob(os.path.join(tmp, "cumemtrace.*.json"))
             if ".oom" not in f]
    if r.returncode != 0 or "done" not in r.stdout or not snaps:
        sys.exit(f"bench_torch_frames: the loop failed:\n{r.stdout[-500:]}{r.stderr[-1500:]}")
    doc = json.load(open(max(snaps, key=os.path.getsize)))
    stacks = {s["id"]: s for s in doc["stacks"]}
    total = ours = 0
    for d in doc["devices"]:
        for row in d.get("churn", []):
            total += row["allocs"]
            frames = stacks[row["stack"]]["frames"] if row["stack"] is not None else []
            if any(f.get("file") == script for f in frames):
                ours += row["allocs"]
    print(f"allocations={total}")
    print(f"with_script_frames={ours}")
    print(f"share={ours / total if total else 0:.4f}")


if __name__ == "__main__":
    main()
