#!/usr/bin/env python3
"""bench_torch_history.py - what PyTorch's own allocation history costs per
allocation, beside what cumemtrace adds, in one real training loop (the honest
peer), and the cost rows of the tensor model: cumemtrace's default, and with
the peak's tensors, each against PyTorch's cheapest history that names
lines (enabled="state", stacks="python") alone, plus 1 % of a step.

The loop: an nn.Linear MLP with AdamW, and a GPT-2-shaped transformer
(transformers' GPT2LMHeadModel from a config, random weights) with AdamW
(real PyTorch, its real caching allocator, the stand-in cuBLAS/cuDNN) on
the simulated GPU (scripts/simgpu), where
kernels take no time - so every figure is the worst case: a real GPU's step
also waits for its kernels.  Processes (SIDES), every mode of a side in one:
  bare:   history off; PyTorch's _record_memory_history with stacks="python"
          (enabled="state", context="alloc": its cheapest that names each
          block's line, the budget's reference; the same with the trace the
          peak's tensors replay, the layer's PEAK_MODE read from
          src/torchboot/layer/history.py; enabled="all", context="all", as
          memory_viz records), and stacks="all" (Python and C++)
  ours:   `cumemtrace run`'s default (its hooks + the history it turns on,
          with the trace the peak's tensors replay), and the same with the
          history off in-process
  nopeak: `cumemtrace run` with CUMEMTRACE_TORCH_PEAK=0 (no trace: the
          history's enabled="state" alone)
Instructions: callgrind (cumemtrace's sides without the stream that
survives SIGKILL, whose checkpoints follow wall time: counting_env) with
instrumentation off until the loop (importing
torch under callgrind takes minutes), the steps bracketed with client
requests (tests/bench/cg_requests.c), slope between N and 3N steps so warm-up
and dump costs cancel; all threads (autograd's included).  Wall and CPU:
the same loop outside valgrind, a process a mode (the history set once,
a warm-up block, the collector on), all started together and run in
lockstep: ROUNDS rounds, each one block of CPU_STEPS steps in every
process, in a shuffled order, so that a round's blocks saw about the same
load (the blocks of a few steps of one process a mode that this replaced
measured the first steps after start-up, and their fixed costs, on a
loaded machine); median [min-max] per step.  The cost rows: instructions,
and CPU as the excess over the reference round by round, a share of the
floor's step in the same round: median [quartiles] (the verdict's spread:
quartiles crossing the budget line are not measurable) and the least and
greatest.

    scripts/bench_torch_history.py --build build [--models mlp,gpt2] [--steps 10]
        [--gpt2-steps 10] [--rounds 20] [--cpu-steps 100] [--gpt2-cpu-steps 20]
        [--write FILE]

Prints a table per model (and key=value lines on stderr:
share_<model>_<mode>=F, instr_per_alloc_<model>_<mode>=N); --write appends (or replaces) the "PyTorch's
allocation history" section of FILE.
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from benchlib import clean_env, spread, torch_python, write_section

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r'''
import atexit, ctypes, gc, json, sys, time
import torch


@atexit.register
def settle():
    # PyTorch's exit race after backward() (tests/torch/scenarios/settle.py):
    # the autograd thread gets the GIL before the interpreter finalises
    for _ in range(4):
        time.sleep(0.05)
cg = ctypes.CDLL(sys.argv[1])
cg.cg_stop.argtypes = [ctypes.c_char_p]
modes, steps_n, warm, counting = sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
HIST = {
    "state_python": dict(enabled="state", context="alloc", stacks="python"),
    "peak_trace": json.loads(sys.argv[9]),  # layer/history.py's PEAK_MODE
    "all_python": dict(enabled="all", context="all", stacks="python", max_entries=100000),
    "state_all": dict(enabled="state", context="alloc", stacks="all"),
}
torch.manual_seed(0)
if sys.argv[6] == "gpt2":
    import os
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is fetched: the config is here
    import transformers
    config = transformers.GPT2Config(**json.loads(sys.argv[7]))
    config._attn_implementation = "sdpa"
    model = transformers.GPT2LMHeadModel(config).cuda()
    model.train()
    ids = torch.randint(0, config.vocab_size, tuple(json.loads(sys.argv[8])), device="cuda")
    loss = lambda: model(input_ids=ids, labels=ids).loss
else:
    model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(1024, 1024), torch.nn.GELU())]).cuda()
    x = torch.randn(64, 1024, device="cuda")
    loss = lambda: model(x).square().mean()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

def steps(n):
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()
    torch.cuda.synchronize()

def allocs():
    return torch.cuda.memory_stats().get("allocation.all.allocated", 0)

def set_mode(m):
    if m == "as_is":
        return  # what the process started with (cumemtrace's own choice)
    torch.cuda.memory._record_memory_history(enabled=None)
    if m != "off":
        torch.cuda.memory._record_memory_history(**HIST[m])

def recorded():
    """Whether a block allocated here carries its Python frames."""
    probe = torch.empty(1024, device="cuda")
    on = any(b.get("frames") for s in torch.cuda.memory._snapshot()["segments"]
             for b in s["blocks"] if b["address"] == probe.data_ptr())
    del probe
    return on

steps(3)  # the optimizer's state, the allocator's segments
# a collection in one count and not the other would be most of the slope
gc.collect()
gc.disable()
out = {"history": {}}
if counting:
    for m in modes:
        set_mode(m)
        steps(2)
        out["history"][m] = recorded()
        for n in (steps_n, 3 * steps_n):
            a0 = allocs()
            cg.cg_start()
            steps(n)
            cg.cg_stop(f"{m}.{n}".encode())
            out[f"{m}.{n}"] = allocs() - a0
else:
    # one mode a process, set once; blocks of steps_n steps on request
    # ("go" on stdin), so that the driver runs the processes of every mode
    # in lockstep, one block each a round, and a round's blocks saw the
    # same load; the collector on, as in a program
    (m,) = modes
    set_mode(m)
    steps(warm)
    gc.enable()
    gc.collect()
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        a0, w0, c0 = allocs(), time.perf_counter(), time.process_time()
        steps(steps_n)
        print("BLOCK " + json.dumps({"wall": (time.perf_counter() - w0) / steps_n,
                                     "cpu": (time.process_time() - c0) / steps_n,
                                     "allocs": (allocs() - a0) / steps_n}), flush=True)
print("RESULT " + json.dumps(out), flush=True)
'''

# The processes of one model: (side, its environment, its modes).  "nopeak"
# is `cumemtrace run` without the peak's tensors (CUMEMTRACE_TORCH_PEAK=0: the
# layer's history keeps no trace of events), what they add to the default.
SIDES = [("bare", {}, ["off", "state_python", "peak_trace", "all_python", "state_all"]),
         ("ours", {}, ["as_is", "off"]),
         ("nopeak", {"CUMEMTRACE_TORCH_PEAK": "0"}, ["as_is"])]
LABEL = {
    ("bare", "off"): "PyTorch, no history (the floor)",
    ("bare", "state_python"): "PyTorch history, stacks='python' (state: its cheapest that names lines)",
    ("bare", "peak_trace"): "PyTorch history + trace, context='alloc' (the peak's tensors replay it)",
    ("bare", "all_python"): "PyTorch history, stacks='python', enabled='all' (as memory_viz records)",
    ("bare", "state_all"): "PyTorch history, stacks='all' (Python + C++)",
    ("ours", "as_is"): "cumemtrace run (default: its hooks, the history, the peak's trace)",
    ("ours", "off"): "cumemtrace run, the history off",
    ("nopeak", "as_is"): "cumemtrace run, CUMEMTRACE_TORCH_PEAK=0 (no peak's tensors)",
}
BUDGET = 0.01  # the default may add this share of a step (the floor's) to PyTorch's cheapest line-naming history


def layer_mode(name):
    """A history mode of the PyTorch layer (src/torchboot/layer/history.py),
    read from its source, so that the bench measures what the layer turns on."""
    import ast
    tree = ast.parse(open(os.path.join(ROOT, "src", "torchboot", "layer", "history.py")).read())
    consts = {}  # the module's literal constants, which a mode may name
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass

    def value(v):
        if isinstance(v, ast.Name) and v.id in consts:
            return consts[v.id]
        return ast.literal_eval(v)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name
                                                for t in node.targets):
            return {k.arg: value(k.value) for k in node.value.keywords}
    sys.exit(f"bench_torch_history: no {name} in src/torchboot/layer/history.py")


# The models: the MLP, and a GPT-2-shaped transformer (Hugging Face's
# GPT2LMHeadModel from a config, random weights, fp32, SDPA attention; the
# shape of tests/torch/scenarios/model_hf.py) - what "a real model's step"
# means in the target.
GPT2 = dict(n_layer=2, n_head=4, n_embd=256, vocab_size=2048, n_positions=512)
GPT2_BATCH = [4, 256]
MODELS = {
    "mlp": "an nn.Linear MLP (4 x 1024, batch 64) with AdamW",
    "gpt2": (f"a GPT-2-shaped transformer (transformers' GPT2LMHeadModel from a config: "
             f"{GPT2['n_layer']} layers, {GPT2['n_head']} heads, width {GPT2['n_embd']}, "
             f"vocabulary {GPT2['vocab_size']}; batch {GPT2_BATCH[0]} x {GPT2_BATCH[1]} "
             f"tokens, fp32, SDPA) with AdamW"),
}


def command(args, py, where, modes, counting, child, toggle, out=None):
    # counting: the slope's N; timing: the block's steps and the warm-up
    n, warm = (args.steps, 1) if counting else (args.cpu_steps, args.cpu_steps)
    argv = [py, child, toggle, ",".join(modes), str(n), str(max(3, warm)),
            "1" if counting else "0", args.model, json.dumps(GPT2), json.dumps(GPT2_BATCH),
            json.dumps(layer_mode("PEAK_MODE"))]
    if counting:
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-systime=no",
                "--trace-children=yes", f"--callgrind-out-file={out}.%p"] + \
            (argv if where == "bare" else [os.path.join(args.build, "cumemtrace"), "run",
                                           "--"] + argv)
    elif where != "bare":
        argv = [os.path.join(args.build, "cumemtrace"), "run", "--"] + argv
    return [os.path.join(HERE, "simgpu"), "--build", args.build, "--memory", "24GiB",
            "--"] + argv


def counting_env(extra):
    """The environment of a callgrind run: the side's own (`extra`) with the
    stream that survives SIGKILL off.  Its thread writes a checkpoint every
    CUMEMTRACE_FLUSH_MS of wall time - the first one also reads the symbol
    tables - and under valgrind, whose clock runs at a fraction of the
    loop's pace, whether one lands in the N-step or the 3N-step block is
    chance: one in the N block took its cost off the slope.
    Its cost follows time, not allocations (stream.c keeps it under 0.5 %
    of a CPU); the wall and CPU rows, outside valgrind, keep it."""
    return dict(extra, CUMEMTRACE_STREAM="off")


def run(cmd, cwd, extra_env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=1800,
                       env=dict(clean_env(), **(extra_env or {})))
    m = re.search(r"^RESULT (.*)$", p.stdout, re.M)
    if p.returncode != 0 or m is None:
        sys.exit(f"bench_torch_history: {' '.join(cmd[-6:])} failed (exit {p.returncode}):\n"
                 f"{p.stderr[-2000:]}")
    return json.loads(m.group(1))


def dumps(prefix):
    """{label: instructions} from the client-request dumps."""
    got = {}
    for f in glob.glob(prefix + ".*"):
        label, total = None, None
        with open(f, errors="replace") as fh:
            for line in fh:
                if line.startswith("desc: Trigger: Client Request: "):
                    label = line.split("Client Request: ", 1)[1].strip()
                elif line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
        if label is not None and total is not None:
            got[label] = total
    return got


def paired(side, ref, floor):
    """The CPU excess of `side` over `ref` a step, a share of `floor`'s step,
    round by round (lists of CPU per step, one item a round, the three
    measured in the same round): (first quartile, median, third quartile,
    least, greatest).  The quartiles are the spread the verdict reads: on a
    shared machine a round now and then runs a block beside another
    program's burst, which the least and greatest show."""
    d = sorted((a - b) / f for a, b, f in zip(side, ref, floor))
    q = statistics.quantiles(d, n=4, method="inclusive") if len(d) > 1 else [d[0]] * 3
    return q[0], q[1], q[2], d[0], d[-1]


def lockstep(args, py, toggle, tmp, child, keys):
    """{key: {"wall": [...], "cpu": [...]}}, a figure a round (per step) of
    each (side, mode) in `keys`: the processes started together, each
    warmed up, then args.rounds rounds of one block each."""
    import random
    env = {where: extra for where, extra, _ in SIDES}
    procs, errs = {}, {}
    try:
        for key in keys:
            errs[key] = tempfile.TemporaryFile(mode="w+", dir=tmp)
            procs[key] = subprocess.Popen(
                command(args, py, key[0], [key[1]], False, child, toggle), cwd=tmp,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errs[key], text=True,
                env=dict(clean_env(), **env[key[0]]))

        def answer(key, word):
            p = procs[key]
            for line in p.stdout:
                if line.startswith(word):
                    return line[len(word):].strip()
            p.wait()
            errs[key].seek(0)
            sys.exit(f"bench_torch_history: {key[0]} {key[1]} ended (exit {p.returncode}) "
                     f"before its {word.strip()}:\n{errs[key].read()[-2000:]}")
        for key in keys:
            answer(key, "READY")
        times = {k: {"wall": [], "cpu": []} for k in keys}
        order = list(keys)
        shuffle = random.Random(0).shuffle
        for _ in range(args.rounds):
            shuffle(order)
            for key in order:
                procs[key].stdin.write("go\n")
                procs[key].stdin.flush()
                got = json.loads(answer(key, "BLOCK "))
                times[key]["wall"].append(got["wall"])
                times[key]["cpu"].append(got["cpu"])
        return times
    finally:
        for p in procs.values():
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in procs.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def verdict(instr, lo, hi, line):
    """met / MISSED / not measurable of a cost against `line` (the excess
    over the reference, a share of the floor's step): instructions, and CPU
    by its spread [lo-hi] (a spread that crosses the line is not
    measurable); met only if both meet."""
    if instr > line or lo > line:
        return "MISSED"
    if hi > line:
        return "not measurable"
    return "met"


def measure(args, py, toggle, tmp, child):
    """The table of one model (args.model, args.steps) and its cost rows."""
    # instructions: one process per side, every mode inside it
    instr, allocs, hist = {}, {}, {}
    keys = [(where, m) for where, _, modes in SIDES for m in modes]
    for where, extra, modes in SIDES:
        prefix = os.path.join(tmp, f"cg.{args.model}.{where}")
        res = run(command(args, py, where, modes, True, child, toggle, prefix), tmp,
                  counting_env(extra))
        got = dumps(prefix)
        n, n3 = args.steps, 3 * args.steps
        for m in modes:
            a, b = got.get(f"{m}.{n}"), got.get(f"{m}.{n3}")
            if a is None or b is None:
                sys.exit(f"bench_torch_history: no callgrind dump for {where} {m} "
                         f"(found {sorted(got)})")
            instr[(where, m)] = (b - a) / (n3 - n)
            hist[(where, m)] = res["history"][m]
            allocs[(where, m)] = (res[f"{m}.{n3}"] - res[f"{m}.{n}"]) / (n3 - n)
    # wall and CPU: outside valgrind, a process a mode (its history set once,
    # warmed up by a block), the processes in lockstep: each round runs one
    # block of args.cpu_steps steps in each, in a shuffled order, so that
    # the blocks of one round saw about the same load and are compared
    times = lockstep(args, py, toggle, tmp, child, keys)
    lines = []
    say = lines.append
    floor = instr[("bare", "off")]
    per_step_allocs = allocs[("bare", "off")]
    say(f"PyTorch allocation history vs cumemtrace: {MODELS[args.model]} "
        f"on the simulated GPU, {per_step_allocs:.0f} allocations a step "
        f"(PyTorch's allocation.all.allocated); instructions: callgrind, all threads, "
        f"slope {args.steps} -> {3 * args.steps} steps; wall and CPU per step: median "
        f"[min-max] of {args.rounds} blocks of {args.cpu_steps} steps, a process a mode, "
        f"in lockstep")
    say(f"  {'':72s} {'instr/step':>12s} {'added/alloc':>11s} {'share':>7s}   wall, cpu per step")
    for key in keys:
        i = instr[key]
        added = (i - floor) / per_step_allocs if per_step_allocs else 0.0
        share = i / floor - 1
        t = times[key]
        want = key[1] != "off"
        say(f"  {LABEL[key]:72s} {i:12,.0f} {added:11,.0f} {share * 100:6.1f}%   "
            f"{spread(t['wall'], unit=' ms', scale=1e3)}, "
            f"{spread(t['cpu'], unit=' ms', scale=1e3)}"
            f"{'' if hist[key] == want else '  (history ' + ('on' if hist[key] else 'off') + '!)'}")
        name = f"{args.model}_{key[0]}_{key[1]}"
        print(f"share_{name}={share:.4f} instr_per_alloc_{name}={added:.0f}", file=sys.stderr)
    # the cost rows: each against PyTorch's cheapest line-naming history
    # alone, the excess a share of a step without history (the floor): the
    # budget is 1 % of a step, not 1 % of the history's step
    ref = ("bare", "state_python")
    for key, what in ((("ours", "as_is"), "the default tensor model (the peak's tensors on)"),
                      (("nopeak", "as_is"), "the tensor model without the peak's tensors")):
        r_instr = (instr[key] - instr[ref]) / floor
        lo, mid, hi, least, most = paired(times[key]["cpu"], times[ref]["cpu"],
                                          times[("bare", "off")]["cpu"])
        v = verdict(r_instr, lo, hi, BUDGET)
        if not hist[key]:
            v = "not measurable (its run kept no history)"
        per_alloc = (instr[key] - instr[("ours", "as_is")]) / per_step_allocs \
            if key != ("ours", "as_is") and per_step_allocs else None
        say(f"  cost: {what} <= PyTorch's cheapest line-naming history + {BUDGET * 100:.0f} % "
            f"of a step: {v} - instr {r_instr * 100:+.1f} % of a step over it; CPU "
            f"{mid * 100:+.1f} % [{lo * 100:+.1f}-{hi * 100:+.1f}] (rounds' median "
            f"[quartiles], all {least * 100:+.1f}-{most * 100:+.1f})"
            + (f"; {-per_alloc:+,.0f} instructions an allocation for the peak's tensors"
               if per_alloc is not None else ""))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="mlp,gpt2", help="of: " + ", ".join(MODELS))
    ap.add_argument("--steps", type=int, default=10, help="the MLP's N (slope N -> 3N)")
    ap.add_argument("--gpt2-steps", type=int, default=10, help="the GPT-2 model's N")
    ap.add_argument("--rounds", type=int, default=20,
                    help="blocks of steps each mode's process runs for wall/CPU")
    ap.add_argument("--cpu-steps", type=int, default=100,
                    help="the MLP's steps in a wall/CPU block (and its warm-up)")
    ap.add_argument("--gpt2-cpu-steps", type=int, default=20, help="the GPT-2 model's")
    ap.add_argument("--write", help="append the figures to this markdown file")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    models = args.models.split(",")
    if not models or any(m not in MODELS for m in models):
        sys.exit(f"bench_torch_history: --models takes {', '.join(MODELS)}")
    py = torch_python()
    if py is None:
        print("PyTorch history: no PyTorch venv (scripts/torch-env.sh); not measured")
        return
    toggle = os.path.join(args.build, "tests", "bench", "libcg_requests.so")
    tmp = tempfile.mkdtemp(prefix="cumemtrace-bench-history-")
    child = os.path.join(tmp, "loop.py")
    with open(child, "w") as f:
        f.write(CHILD)
    lines = []
    for model in models:
        one = argparse.Namespace(**vars(args))
        one.model = model
        one.steps = args.gpt2_steps if model == "gpt2" else args.steps
        one.cpu_steps = args.gpt2_cpu_steps if model == "gpt2" else args.cpu_steps
        lines += measure(one, py, toggle, tmp, child) + [""]
    lines = lines[:-1]
    print("\n".join(lines))
    if args.write:
        text = "\n".join(["## PyTorch's allocation history", "",
                          "Produced by `make bench` (scripts/bench_torch_history.py).", "",
                          "```"] + lines + ["```", ""])
        write_section(args.write, "## PyTorch's allocation history", text)


if __name__ == "__main__":
    main()
