#!/usr/bin/env python3
"""bench_cli_read.py - `make bench`'s rows for `report` and `diff` of the big
generated snapshot (report <= 0.6 s, diff <= 1.2 s, RSS <=
150 MiB), also runnable alone.

Two files of the shape a real training run writes (scripts/gen_big_snapshot.py:
N live allocations over S call sites, an event row per allocation, per-site
churn, native frames in 40 libraries, Python frames), different seeds.  Each
command runs --reps times, report and diff interleaved: wall clock (from
fork to exit), CPU (user + system of the child) and peak RSS, printed as
median [min-max].  Then callgrind counts the instructions of the same
commands on the same files (the whole process), which a loaded machine does
not move; printed beside, per byte read.  Each target is judged on this
run's medians: met, MISSED, or not measured.

  scripts/bench_cli_read.py --cli build/cumemtrace [--allocations 1000000]
      [--stacks 100000] [--reps 5] [--no-instr] [--json out.json] [--keep DIR]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import spread

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "gen_big_snapshot.py")

ap = argparse.ArgumentParser()
ap.add_argument("--cli", required=True)
ap.add_argument("--allocations", type=int, default=1_000_000)
ap.add_argument("--stacks", type=int, default=100_000)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--no-instr", action="store_true", help="skip the callgrind counts")
ap.add_argument("--json", help="also write the figures to this file (for bench.py)")
ap.add_argument("--keep", help="generate the files into this directory and keep them")
a = ap.parse_args()

TARGETS = {"report": 0.6, "diff": 1.2}  # seconds, wall and CPU
RSS_MIB = 150
tmp = a.keep or tempfile.mkdtemp(prefix="cumemtrace-bench-read-")
os.makedirs(tmp, exist_ok=True)
files = []
for seed in (1, 2):
    path = os.path.join(tmp, f"gen{seed}.json")
    files.append(path)
    if not os.path.exists(path):
        subprocess.run([sys.executable, GEN, "--allocations", str(a.allocations),
                        "--stacks", str(a.stacks), "--events", str(a.allocations),
                        "--seed", str(seed), "-o", path],
                       check=True, capture_output=True, timeout=1800)
size = os.path.getsize(files[0])
CMDS = {"report": [a.cli, "report", files[0]], "diff": [a.cli, "diff", files[0], files[1]]}
READ = {"report": size, "diff": size + os.path.getsize(files[1])}


def once(argv):
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 1):  # 1: diff's gate, never set here; kept as bench.py had it
        sys.exit(f"bench_cli_read: {' '.join(argv)} failed ({rc}): "
                 f"{p.stderr.read().decode(errors='replace')[-500:]}")
    p.stderr.close()
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def instructions(argv):
    out = os.path.join(tmp, "callgrind.out")
    p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        "--toggle-collect=main"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=1800)
    if p.returncode not in (0, 1):
        sys.exit(f"bench_cli_read: callgrind {' '.join(argv)} failed: {p.stderr[-500:]}")
    m = re.search(r"Collected : (\d+)", p.stderr)
    os.unlink(out)
    return int(m.group(1))


load0 = os.getloadavg()[0]
print(f"report and diff of generated snapshots ({a.allocations} live / {a.stacks} call "
      f"sites, an event row per allocation, churn rows for every site, native frames in "
      f"40 libraries, Python frames; {size / 2**20:.1f} MiB each, "
      f"scripts/gen_big_snapshot.py), {a.reps} interleaved runs on {os.cpu_count()} "
      f"cores, load average {load0:.1f} at the start:", flush=True)
R = {w: {"wall": [], "cpu": [], "rss": []} for w in CMDS}
for _ in range(a.reps):
    for what, argv in CMDS.items():
        w, c, r = once(argv)
        R[what]["wall"].append(w)
        R[what]["cpu"].append(c)
        R[what]["rss"].append(r)
print(f"  (load average {os.getloadavg()[0]:.1f} after the timed runs: wall above CPU is "
      f"time spent waiting for a core)", flush=True)
valgrind = shutil.which("valgrind") and not a.no_instr
rows = []
for what in CMDS:
    r = R[what]
    line = (f"  cumemtrace {what}: wall {spread(r['wall'], unit=' s')}, CPU {spread(r['cpu'], unit=' s')}, "
            f"peak RSS {spread(r['rss'], '.0f', ' MiB')}")
    if valgrind:
        r["instr"] = instructions(CMDS[what])
        r["per_byte"] = r["instr"] / READ[what]
        line += f"; {r['instr'] / 1e9:.2f} G instructions ({r['per_byte']:.2f} per byte read)"
    print(line, flush=True)
    limit = TARGETS[what]
    wall, cpu = statistics.median(r["wall"]), statistics.median(r["cpu"])
    instr = (f"; instr {r['instr'] / 1e9:.2f} G ({r['per_byte']:.2f} per byte)"
             if valgrind else "; instr not counted (no valgrind)")
    rows.append(("met" if wall <= limit and cpu <= limit else "MISSED",
                 f"{what} of the generated snapshot{'s' if what == 'diff' else ''} "
                 f"<= {limit} s (wall and CPU)",
                 f"wall {spread(r['wall'], unit=' s')}; CPU {spread(r['cpu'], unit=' s')}{instr}"))
    rss = statistics.median(r["rss"])
    rows.append(("met" if rss <= RSS_MIB else "MISSED",
                 f"{what} of the generated snapshot{'s' if what == 'diff' else ''} "
                 f"<= {RSS_MIB} MiB peak RSS", f"peak RSS {spread(r['rss'], '.0f', ' MiB')}"))
print("targets, judged on the medians of this run:")
for state, what, text in rows:
    print(f"  {state:<14} {what}: {text}")
if a.json:
    with open(a.json, "w") as f:
        json.dump({"runs": R, "rows": rows, "bytes": READ}, f)
if not a.keep:
    shutil.rmtree(tmp, ignore_errors=True)
