#!/usr/bin/env python3
"""bench_fit.py - what `cumemtrace fit` adds to the bare simulated run of the
same script on the same card (at most 10 %).

    scripts/bench_fit.py --build build [--write docs/performance.md] [--quick]

The workload is tests/torch/scenarios/model_mlp.py (an nn.Linear MLP with
AdamW, 3 steps: import torch, the caching allocator, cuBLAS's workspace) on
the l4 preset, run by the PyTorch venv's python (scripts/torch-env.sh):

    bare: scripts/simgpu --gpu l4 -- python model_mlp.py
    fit:  cumemtrace fit --gpu l4 -- python model_mlp.py   (the tracer, the
          PyTorch layer, the snapshot, the table)

Wall clock and CPU time (user + system of the whole process tree): the
median of --reps runs of each, alternated so that both see the same machine.
Instructions: one run of each under callgrind with --trace-children=yes, the
instructions of every process summed (valgrind's "Collected" lines).  The
target is judged on each ratio and printed as met or MISSED.  --write
appends (or replaces) the "cumemtrace fit overhead" section of the file.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from benchlib import clean_env, torch_python, write_section

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--build", default="build")
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--quick", action="store_true", help="3 runs each, no callgrind")
ap.add_argument("--write", help="append the figures to this markdown file")
args = ap.parse_args()

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.abspath(args.build)
CLI = os.path.join(BUILD, "cumemtrace")
SIMGPU = os.path.join(HERE, "simgpu")
SCRIPT = os.path.join(ROOT, "tests", "torch", "scenarios", "model_mlp.py")
CARD = "l4"
LIMIT = 1.10
REPS = 3 if args.quick else args.reps
VALGRIND = None if args.quick else shutil.which("valgrind")

PY = torch_python()
if not PY:
    print("bench_fit: not measured: no PyTorch venv (scripts/torch-env.sh creates it)")
    sys.exit(0)

TMP = tempfile.mkdtemp(prefix="cumemtrace-bench-fit-")
ENV = clean_env()


def argv(which, out):
    if which == "bare":
        return [SIMGPU, "--build", BUILD, "--gpu", CARD, "--", PY, SCRIPT]
    return [CLI, "fit", "--gpu", CARD, "--output", out, "--", PY, SCRIPT]


def timed(which, n):
    """(wall s, CPU s) of one run, in a child Python of its own so that
    RUSAGE_CHILDREN is that run's process tree alone."""
    out = os.path.join(TMP, f"{which}{n}")
    code = ("import resource, subprocess, sys, time; t = time.monotonic(); "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL); w = time.monotonic() - t; "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(r.returncode, w, u.ru_utime + u.ru_stime)")
    p = subprocess.run([sys.executable, "-c", code, *argv(which, out)], env=ENV, cwd=TMP,
                       capture_output=True, text=True, check=True)
    rc, wall, cpu = p.stdout.split()
    if rc != "0":
        sys.exit(f"bench_fit: the {which} run failed (exit {rc}): {' '.join(argv(which, out))}")
    return float(wall), float(cpu)


def instructions(which):
    """Instructions of every process of one run under callgrind, summed from
    the per-process output files (a process's own "Collected" line goes to
    its stderr, which fit sends to output.log)."""
    out = os.path.join(TMP, f"cg-{which}")
    os.makedirs(out, exist_ok=True)
    p = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                        f"--callgrind-out-file={out}/cg.%p", *argv(which, out + "/fit")],
                       env=ENV, cwd=TMP, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_fit: the {which} run under callgrind failed: {p.stderr[-500:]}")
    counts = []
    for name in sorted(os.listdir(out)):
        if not name.startswith("cg."):
            continue
        with open(os.path.join(out, name)) as f:
            text = f.read()
        m = re.search(r"^totals:\s+(\d+)", text, re.M) or re.search(r"^summary:\s+(\d+)",
                                                                  text, re.M)
        if m:
            counts.append(int(m.group(1)))
    return sum(counts), len(counts)


def med(xs):
    s = sorted(xs)
    return s[len(s) // 2]


runs = {"bare": [], "fit": []}
timed("bare", -1)  # warm the page cache: the first import of torch reads GBs
for n in range(REPS):
    for which in ("bare", "fit"):
        runs[which].append(timed(which, n))
wall = {k: [w for w, _ in v] for k, v in runs.items()}
cpu = {k: [c for _, c in v] for k, v in runs.items()}
wall_ratio = med(wall["fit"]) / med(wall["bare"])
cpu_ratio = med(cpu["fit"]) / med(cpu["bare"])
instr = {k: instructions(k) for k in ("bare", "fit")} if VALGRIND else None


def verdict(r):
    return "met" if r <= LIMIT else "MISSED"


lines = [
    "## `cumemtrace fit` overhead",
    "",
    "Produced by `make bench` (scripts/bench_fit.py): "
    f"`tests/torch/scenarios/model_mlp.py` (nn.Linear MLP, AdamW, 3 steps) on the "
    f"`{CARD}` preset, bare (`scripts/simgpu --gpu {CARD} -- python model_mlp.py`) and "
    f"under `cumemtrace fit --gpu {CARD}`; median of {REPS} alternated runs each "
    "(wall clock, and CPU time of the whole process tree)"
    + (", instructions of every process of one run each under callgrind." if instr
       else "; instructions not counted (valgrind missing or --quick)."),
    "",
    "| figure | bare | fit | ratio | target <= 1.10 |",
    "|---|---:|---:|---:|---|",
    f"| wall clock | {med(wall['bare']):.2f} s | {med(wall['fit']):.2f} s | "
    f"{wall_ratio:.3f} x | {verdict(wall_ratio)} |",
    f"| CPU time | {med(cpu['bare']):.2f} s | {med(cpu['fit']):.2f} s | "
    f"{cpu_ratio:.3f} x | {verdict(cpu_ratio)} |",
]
if instr:
    ir = instr["fit"][0] / instr["bare"][0]
    lines.append(f"| instructions | {instr['bare'][0] / 1e9:.2f} G ({instr['bare'][1]} "
                 f"processes) | {instr['fit'][0] / 1e9:.2f} G ({instr['fit'][1]} processes) "
                 f"| {ir:.3f} x | {verdict(ir)} |")
lines += [
    "",
    "Wall runs, bare: " + ", ".join(f"{w:.2f}" for w in wall["bare"]) + " s; fit: "
    + ", ".join(f"{w:.2f}" for w in wall["fit"]) + " s.",
    "",
]
text = "\n".join(lines)
print(text)
if args.write:
    write_section(args.write, "## `cumemtrace fit` overhead", text)
shutil.rmtree(TMP, ignore_errors=True)
