#!/usr/bin/env python3
"""bench_ranks.py - the scale figure of the multi-rank merge:
`cumemtrace report DIR` over 8, 16, 32 and 64 synthetic ranks, time and peak
RSS of the tool, and the RSS growth per added rank (least-squares slope),
against the RSS of reporting one rank file alone.

    scripts/bench_ranks.py --build build [--write docs/performance.md]

Each rank's file is the same gen_big_snapshot.py shape (--allocations,
--stacks, --events; the default is small so `make bench` stays quick) with
its own rank number: the ranks share their call sites, as the ranks of a
data-parallel job do, so a merge bounded by distinct call sites stays flat
while one holding every file would grow by a file's footprint per rank.
--write appends (or replaces) the "Multi-rank merge" section of the file.
"""
import argparse
import os
import shutil
import subprocess
import sys

from benchlib import write_section

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--build", default="build")
ap.add_argument("--allocations", type=int, default=20000)
ap.add_argument("--stacks", type=int, default=2000)
ap.add_argument("--events", type=int, default=2000)
ap.add_argument("--ranks", default="8,16,32,64")
ap.add_argument("--write", help="append the figures to this markdown file")
args = ap.parse_args()

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.path.join(args.build, "cumemtrace")
WORK = os.path.join(args.build, "bench", "ranks")
counts = [int(x) for x in args.ranks.split(",")]

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
one = os.path.join(WORK, "rank0.json")
subprocess.run([sys.executable, os.path.join(HERE, "gen_big_snapshot.py"),
                "--allocations", str(args.allocations), "--stacks", str(args.stacks),
                "--events", str(args.events), "--seed", "1", "-o", one],
               check=True, stdout=subprocess.DEVNULL)
with open(one, "rb") as f:
    doc = f.read()
assert doc.count(b'"rank":0,') == 1, "gen_big_snapshot.py no longer writes \"rank\":0"
size = len(doc)
alld = os.path.join(WORK, "all")
os.makedirs(alld)
for r in range(max(counts)):
    with open(os.path.join(alld, f"cumemtrace.bench.{1000 + r}.{r}.json"), "wb") as f:
        f.write(doc.replace(b'"rank":0,', b'"rank":%d,' % r))


def measure(target):
    """CPU seconds (user + system: wall time means little on a shared
    machine) and peak RSS (KiB) of `cumemtrace report target`, in a child
    Python of its own so that RUSAGE_CHILDREN is the tool's alone."""
    code = ("import resource, subprocess, sys; "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(r.returncode, u.ru_utime + u.ru_stime, u.ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, CLI, "report", target],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "0", out
    return float(out[1]), int(out[2])


rows = []
t1, rss1 = min(measure(one) for _ in range(2))
for n in counts:
    d = os.path.join(WORK, f"n{n}")
    os.makedirs(d)
    for name in sorted(os.listdir(alld))[:n]:
        os.link(os.path.join(alld, name), os.path.join(d, name))
    t, rss = min(measure(d) for _ in range(2))  # the less disturbed of two
    rows.append((n, t, rss))

xs = [r[0] for r in rows]
ys = [r[2] for r in rows]
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)

lines = [
    "## Multi-rank merge (`cumemtrace report DIR`)",
    "",
    "Produced by `make bench` (scripts/bench_ranks.py): synthetic ranks of "
    f"{args.allocations} allocations in {args.stacks} call sites ({size / 1e6:.1f} MB "
    "each, call sites shared across ranks); CPU time and peak RSS of the tool, best of two.",
    "",
    "| ranks | CPU time | peak RSS |",
    "|---:|---:|---:|",
    f"| 1 (one file, `report FILE`) | {t1:.2f} s | {rss1 / 1024:.1f} MiB |",
]
lines += [f"| {n} | {t:.2f} s | {rss / 1024:.1f} MiB |" for n, t, rss in rows]
tslope = (rows[-1][1] - rows[0][1]) / (rows[-1][0] - rows[0][0])
lines += [
    "",
    f"CPU time per added rank: {tslope * 1000:.0f} ms (one file alone: {t1 * 1000:.0f} ms). "
    f"RSS growth per added rank: {slope:.1f} KiB (least-squares slope over "
    f"{', '.join(map(str, counts))} ranks), against {size / 1024:.0f} KiB per rank file: "
    "the merge holds a row per rank and an aggregate per distinct call site, and reads "
    "one file at a time.",
    "",
]
text = "\n".join(lines)
print(text)
if args.write:
    write_section(args.write, "## Multi-rank merge", text)
shutil.rmtree(WORK, ignore_errors=True)
