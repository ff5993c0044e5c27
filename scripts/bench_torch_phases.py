#!/usr/bin/env python3
"""bench_torch_phases.py - `make bench`, the PyTorch phases row: what the
PyTorch layer's phases (forward / backward / optimizer step and the
module's name, src/torchboot/layer/phases.py) add to a real model's
training step on the simulated GPU (tests/torch/scenarios/phases_cost.py:
an MLP, 17 module calls a step, and a GPT-2-shaped transformer from
transformers, both with AdamW).

Four variants of the same step: bare (no cumemtrace), traced with the
phases off (CUMEMTRACE_TORCH_PHASES=0: the allocation history and the rest
of the layer stay), traced with the default phases (the optimizer's step
hooks; the peak's module read from its frames at a dump), and traced with
PyTorch's global module hooks (CUMEMTRACE_TORCH_PHASES=1).  Each figure
twice: instructions per step, all threads, counted by callgrind between two
client requests around the steps only (tests/bench/cg_requests.c), and wall
clock per step, the median over interleaved processes of each process's
best block.  Target: the default phases add <= 2 % to
the step, in instructions and in wall clock; the hooks' cost is printed
beside it.

  scripts/bench_torch_phases.py --build build [--models mlp,gpt2] [--write docs/performance.md]
      [--quick] [--variants bare,off,on,hooks]
--write replaces the "PyTorch phases" section of the file."""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import clean_env, torch_python, write_section

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--write", help="replace the PyTorch phases section of this markdown file")
ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
ap.add_argument("--models", default="mlp,gpt2", help="of: mlp, gpt2")
ap.add_argument("--variants", default="bare,off,on,hooks",
                help="of: bare, off, on (the default phases), hooks (=1)")
args = ap.parse_args()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(args.build)
SCEN = os.path.join(ROOT, "tests", "torch", "scenarios", "phases_cost.py")
MARK = os.path.join(BUILD, "tests", "bench", "libcg_requests.so")
VALGRIND = shutil.which("valgrind")
ROUNDS = 2 if args.quick else 5
# steps a block, blocks a process, steps counted by callgrind (the GPT-2
# model's step takes a few ms here, as the MLP's does)
STEPS = {m: (20, 3, 5) if args.quick else (50, 5, 20) for m in ("mlp", "gpt2")}
MODELS = {
    "mlp": "8 x (Linear(512, 512), ReLU), AdamW, batch 64",
    "gpt2": "a GPT-2-shaped transformer (transformers' GPT2LMHeadModel from a config: 2 layers, "
            "4 heads, width 256, vocabulary 2048; batch 4 x 256 tokens, fp32, SDPA), AdamW",
}
if any(m not in MODELS for m in args.models.split(",")):
    sys.exit("bench_torch_phases: --models takes mlp, gpt2")
TMP = tempfile.mkdtemp(prefix="cumemtrace-bench-torch-")

py = torch_python()
if not py:
    print("bench_torch_phases: no PyTorch venv (scripts/torch-env.sh): not measured")
    sys.exit(0)


def command(variant, inner):
    cmd = [os.path.join(ROOT, "scripts", "simgpu"), "--build", BUILD, "--memory", "24GiB", "--"]
    if variant != "bare":
        cmd += [os.path.join(BUILD, "cumemtrace"), "run", "--output", TMP + "/", "--"]
    return cmd + inner


def env(variant):
    e = clean_env()
    if variant != "on":
        e["CUMEMTRACE_TORCH_PHASES"] = "1" if variant == "hooks" else "0"
    return e


def run(variant, inner):
    p = subprocess.run(command(variant, inner), env=env(variant), capture_output=True,
                       text=True, timeout=1800)
    m = re.search(r"^COST (.*)$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        sys.exit(f"bench_torch_phases: {variant} failed:\n{p.stderr[-2000:]}")
    return json.loads(m.group(1))


VARIANTS = tuple(args.variants.split(","))
if any(v not in ("bare", "off", "on", "hooks") for v in VARIANTS) or \
        not {"off", "on"} <= set(VARIANTS):
    sys.exit("bench_torch_phases: --variants takes bare, off, on, hooks (off and on at least)")
NAMES = {"bare": "bare (no cumemtrace)", "off": "traced, CUMEMTRACE_TORCH_PHASES=0",
         "on": "traced, phases by default (no module hook)",
         "hooks": "traced, CUMEMTRACE_TORCH_PHASES=1 (module hooks)"}


def measure(model):
    """(table lines, verdicts) of one model."""
    steps, blocks, cg_steps = STEPS[model]
    wall = {v: [] for v in VARIANTS}
    calls = None
    for _ in range(ROUNDS):
        for v in VARIANTS:
            got = run(v, [py, SCEN, model, "wall", str(steps), str(blocks)])
            wall[v].append(got["best_us"])
            calls = got["module_calls"]
    instr = {}
    if VALGRIND and os.path.exists(MARK):
        for v in VARIANTS:
            out = os.path.join(TMP, f"cg-{model}-{v}")
            run(v, [VALGRIND, "--tool=callgrind", "--instr-atstart=no",
                    f"--callgrind-out-file={out}", py, SCEN, model, "instr", str(cg_steps), MARK])
            totals = []
            for f in glob.glob(out + "*"):
                text = open(f, errors="replace").read()
                m = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
                if "steps" in text and m:
                    totals.append(int(m.group(1)))
            if totals:
                instr[v] = max(totals) / cg_steps
    med = {v: statistics.median(wall[v]) for v in VARIANTS}
    w_pct = 100 * (med["on"] - med["off"]) / med["off"]
    lines = [f"{MODELS[model]}: {calls} module calls a step; wall: {ROUNDS} interleaved "
             f"processes of {blocks} blocks of {steps} steps; instructions: {cg_steps} steps.", "",
             "| variant | instructions a step | wall a step (median of best blocks) |",
             "|---|---|---|"]
    for v in VARIANTS:
        name = NAMES[v]
        i = f"{instr[v] / 1e6:.2f} M" if v in instr else "not counted"
        spread = f"{min(wall[v]):.0f}-{max(wall[v]):.0f}"
        lines.append(f"| {name} | {i} | {med[v]:.0f} us [{spread}] |")
    lines.append("")
    verdicts = []
    if "on" in instr and "off" in instr:
        i_pct = 100 * (instr["on"] - instr["off"]) / instr["off"]
        verdicts.append(("met" if i_pct <= 2 else "MISSED", f"instructions {i_pct:+.1f} %"))
    else:
        verdicts.append(("not measured",
                         "instructions: valgrind or tests/bench/cg_requests.c missing"))
    # The wall verdict from the spreads: met when even the slowest default
    # run against the fastest =0 one stays within 2 %, missed when even the
    # fastest against the slowest exceeds it, else "not measurable" (the
    # spread crosses the target).
    lo_off, hi_off, lo_on, hi_on = min(wall["off"]), max(wall["off"]), min(wall["on"]), \
        max(wall["on"])
    w_state = "met" if 100 * (hi_on - lo_off) / lo_off <= 2 else \
        "MISSED" if 100 * (lo_on - hi_off) / hi_off > 2 else "not measurable"
    verdicts.append((w_state, f"wall {w_pct:+.1f} % [spreads {lo_off:.0f}-{hi_off:.0f} / "
                              f"{lo_on:.0f}-{hi_on:.0f} us]"))
    if "hooks" in VARIANTS:
        h = [f"wall {100 * (statistics.median(wall['hooks']) - med['off']) / med['off']:+.1f} %"]
        if "hooks" in instr and "off" in instr:
            h.insert(0, f"instructions {100 * (instr['hooks'] - instr['off']) / instr['off']:+.1f} %")
        lines.append(f"- {model}, CUMEMTRACE_TORCH_PHASES=1 (module hooks, every allocation "
                     f"carries its phase): " + ", ".join(h) + " over =0.")
        lines.append("")
    return lines, verdicts


results = [(m, measure(m)) for m in args.models.split(",")]
load = os.getloadavg()[0]
lines = ["## PyTorch phases (forward, backward, optimizer step)", "",
         f"Measured by `scripts/bench_torch_phases.py` (make bench) on "
         f"`tests/torch/scenarios/phases_cost.py`, on the simulated GPU (kernels take no time: "
         f"the step is all Python, dispatch and allocator work, the worst case for hooks "
         f"that run per module call). Load average {load:.2f} when it ended, "
         f"{os.cpu_count()} CPUs.", ""]
for model, (table, verdicts) in results:
    lines += table
    state = "met" if all(v[0] == "met" for v in verdicts) else \
        "MISSED" if any(v[0] == "MISSED" for v in verdicts) else \
        next(v[0] for v in verdicts if v[0] != "met")
    lines.append(f"- {model}: the default phases add <= 2 % to the step: "
                 f"**{state}** - " + "; ".join(f"{t} ({s})" for s, t in verdicts) + ".")
    lines.append("")
lines.append("- Where it goes: by default a step runs two optimizer hooks (a ctypes call "
             "each); the module of the peak is read from the `self` of its Python frames, "
             "kept by the library only when a device's peak moves (a new cudaMalloc), and "
             "named at a dump. With CUMEMTRACE_TORCH_PHASES=1 PyTorch takes a module "
             "call's slow path once any global hook is registered, and each call runs two "
             "Python hooks with a ctypes call each (push, pop) plus, in backward, one more "
             "hook on the module's output node.")
lines.append("")
text = "\n".join(lines)
print(text)
if args.write:
    write_section(args.write, "## PyTorch phases (forward", text)
shutil.rmtree(TMP, ignore_errors=True)
