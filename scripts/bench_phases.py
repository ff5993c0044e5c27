#!/usr/bin/env python3
"""bench_phases.py - `make bench`, the phases rows: what the program's NVTX
ranges cost under cumemtrace (tests/bench/bench_nvtx.c, built against
NVIDIA's header-only NVTX 3).

  push+pop    nvtxRangePushA/Pop pairs one level under an open range: bare
              (NVTX without a tool: its calls return at once) and traced
              (LD_PRELOAD + NVTX_INJECTION64_PATH = the library)
  in range    cudaMalloc/cudaFree pairs of 1 MiB with two ranges open, against
              the same loop with none open, both traced

Each figure twice, from the same binary: instructions of the loop function
alone (callgrind --toggle-collect; they do not move with the machine's
load), and time per pair, median [min-max] of REPS interleaved repetitions,
as wall clock and as the loop thread's CPU time (on a loaded machine the
wall clock also counts the time the loop waited for a core; the load
average is printed).  Targets: push+pop <= 100 ns added, and
allocations inside ranges no dearer than outside.

  scripts/bench_phases.py --build build [--write docs/performance.md] [--quick]
--write replaces the "Phases (NVTX ranges)" section of the file.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import spread, write_section

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--write", help="replace the phases section of this markdown file")
ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
args = ap.parse_args()

BUILD = os.path.abspath(args.build)
LIB = os.path.join(BUILD, "libcumemtrace.so")
PROG = os.path.join(BUILD, "tests", "bench", "bench_nvtx")
REPS = 3 if args.quick else 7
PAIRS = 200_000 if args.quick else 2_000_000
ALLOC_PAIRS = 20_000 if args.quick else 200_000
CG_PAIRS = 20_000
if not os.path.exists(PROG):
    sys.exit(f"bench_phases: {PROG} not built (no NVTX 3 header? see tests/nvtx.mk)")
VALGRIND = shutil.which("valgrind")
TMP = tempfile.mkdtemp(prefix="cumemtrace-bench-phases.")


def env(traced):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "NVTX_")) and k != "LD_PRELOAD"}
    e["LD_LIBRARY_PATH"] = os.path.join(BUILD, "sim")
    e["SIMCUDA_MEMORY"] = "64GiB"
    e["CUMEMTRACE_OUTPUT"] = TMP + "/"
    if traced:
        e["LD_PRELOAD"] = LIB
        e["NVTX_INJECTION64_PATH"] = LIB
    return e


def run(argv, traced):
    p = subprocess.run([PROG, *map(str, argv)], env=env(traced), capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench_phases: {argv} failed:\n{p.stderr[-2000:]}")
    return {k: float(v) for k, v in re.findall(r"(\w+)=(-?[\d.]+)", p.stdout)}


def instructions(argv, traced, loop, pairs):
    """Instructions per pair of `loop` (inclusive), or None without valgrind."""
    if VALGRIND is None:
        return None
    out = os.path.join(TMP, f"cg.{len(os.listdir(TMP))}")
    p = subprocess.run([VALGRIND, "--tool=callgrind", f"--callgrind-out-file={out}",
                        f"--toggle-collect={loop}", "--collect-systime=no", PROG,
                        *map(str, argv)], env=env(traced), capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        sys.exit(f"bench_phases: callgrind {argv} failed:\n{p.stderr[-2000:]}")
    return int(re.search(r"Collected : (\d+)", p.stderr).group(1)) / pairs


load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
cpus = os.cpu_count()

# ---- push+pop ----
wall = {False: [], True: []}
cpu = {False: [], True: []}
for _ in range(REPS):
    for traced in (False, True):
        r = run(["ranges", PAIRS], traced)
        wall[traced].append(r["ns_per_pair"])
        cpu[traced].append(r["cpu_ns_per_pair"])
add_wall = [t - b for b, t in zip(wall[False], wall[True])]
add_cpu = [t - b for b, t in zip(cpu[False], cpu[True])]
i_bare = instructions(["ranges", CG_PAIRS], False, "ranges_loop", CG_PAIRS)
i_traced = instructions(["ranges", CG_PAIRS], True, "ranges_loop", CG_PAIRS)

# ---- allocations inside ranges and outside (both traced) ----
aw = {"inside": [], "outside": []}
ac = {"inside": [], "outside": []}
for _ in range(REPS):
    for where in ("inside", "outside"):
        r = run(["alloc", ALLOC_PAIRS, where], True)
        aw[where].append(r["ns_per_pair"])
        ac[where].append(r["cpu_ns_per_pair"])
# the loop runs a tenth more first (warm-up), counted too
cg_alloc = CG_PAIRS + CG_PAIRS // 10
ai = {w: instructions(["alloc", CG_PAIRS, w], True, "alloc_loop", cg_alloc)
      for w in ("inside", "outside")}
ai_bare = instructions(["alloc", CG_PAIRS, "outside"], False, "alloc_loop", cg_alloc)
d_wall = [i - o for i, o in zip(aw["inside"], aw["outside"])]
d_cpu = [i - o for i, o in zip(ac["inside"], ac["outside"])]


def verdict(ok):
    return "met" if ok else "missed"


lines = [
    "## Phases (NVTX ranges)",
    "",
    f"`scripts/bench_phases.py` (`make bench`), {REPS} interleaved repetitions, load average "
    f"{load} on {cpus} CPUs when it started. Instructions: callgrind, the loop function "
    "only. Times: ns per pair, median [min-max]; wall clock and the loop thread's CPU time "
    "(on a loaded machine the wall clock also counts the time the loop waited for a core).",
    "",
    "| what | instructions | wall ns | CPU ns |",
    "|---|---|---|---|",
]
if i_bare is not None:
    lines.append(f"| push+pop, bare (NVTX without a tool) | {i_bare:.1f} | {spread(wall[False])} | "
                 f"{spread(cpu[False])} |")
    lines.append(f"| push+pop, traced | {i_traced:.1f} | {spread(wall[True])} | {spread(cpu[True])} |")
    lines.append(f"| **push+pop added** | **{i_traced - i_bare:.1f}** | **{spread(add_wall)}** | "
                 f"**{spread(add_cpu)}** |")
    lines.append(f"| cudaMalloc+cudaFree, bare | {ai_bare:.1f} | | |")
    lines.append(f"| cudaMalloc+cudaFree traced, no range open | {ai['outside']:.1f} | "
                 f"{spread(aw['outside'])} | {spread(ac['outside'])} |")
    lines.append(f"| cudaMalloc+cudaFree traced, inside two ranges | {ai['inside']:.1f} | "
                 f"{spread(aw['inside'])} | {spread(ac['inside'])} |")
    lines.append(f"| **inside minus outside** | **{ai['inside'] - ai['outside']:+.1f}** | "
                 f"**{spread(d_wall, '+.1f')}** | **{spread(d_cpu, '+.1f')}** |")
else:
    lines.append("| (no valgrind: instructions not counted) | | | |")
lines += [""]
pp_cpu = statistics.median(add_cpu)
pp_wall = statistics.median(add_wall)
# "no dearer": within 1% of the pair's own tracing cost, or 10 instructions
tol = max(10.0, 0.01 * (ai["outside"] - ai_bare)) if i_bare is not None else None
lines += [
    f"- push+pop <= 100 ns added: CPU time {pp_cpu:.1f} ns, {verdict(pp_cpu <= 100)}; "
    f"wall clock {pp_wall:.1f} ns, {verdict(pp_wall <= 100)}"
    + (f" (load {load} on {cpus} CPUs: the loop waited for a core)" if pp_wall > 100 >= pp_cpu
       else "")
    + (f"; {i_traced - i_bare:.0f} instructions added" if i_bare is not None else "") + ".",
]
if tol is not None:
    dif = ai["inside"] - ai["outside"]
    lines.append(f"- allocations inside ranges no dearer than outside: {dif:+.1f} instructions "
                 f"a pair (bound: {tol:.0f}), {verdict(dif <= tol)}; CPU time "
                 f"{statistics.median(d_cpu):+.1f} ns a pair (noise: its spread is "
                 f"{min(d_cpu):+.1f} to {max(d_cpu):+.1f}).")
lines += [
    "- Where a push goes: its path is found in the thread's own cache of (name pointer, "
    "parent) - no hash, no lock shared with anyone - then the thread's stack takes it under "
    "the thread's own lock and the clock is read; a pop reads the clock, takes the top entry "
    "and writes one row of the ring the timeline reads (one atomic add on a shared counter). "
    "An allocation reads the thread's phase (one thread-local load) and compares it with its "
    "cached site's (src/preload/phases/phases.c, docs/design.md).",
    "",
]
text = "\n".join(lines)
print(text)
if args.write:
    write_section(args.write, "## Phases (NVTX ranges)", text)
shutil.rmtree(TMP, ignore_errors=True)
