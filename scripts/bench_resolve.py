#!/usr/bin/env python3
"""bench_resolve.py - what resolving native frames from debug information
costs `cumemtrace report` on the big benchmark snapshot (<= 1 s
for 1 M allocations / 100 k stacks).  scripts/bench.py runs it.

The snapshot (scripts/gen_big_snapshot.py --module) has its native frames
in the static functions of a real -g program (tests/bench/bench_symbols.c),
with its real build-id and vaddr_base, so the reader resolves every
distinct one with libdwfl; the same report with CUMEMTRACE_DEBUGINFO=off
keeps the recorded names.  Interleaved repetitions (on, off, on, off...);
prints key=value lines: wall and CPU (user+sys) of each, and the added
time per repetition (on - off) as median, min and max.

  scripts/bench_resolve.py --cli build/cumemtrace \
      --module build/tests/bench/bench_symbols [--allocations N --stacks N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--cli", required=True)
ap.add_argument("--module", required=True, help="a -g program (tests/bench/bench_symbols)")
ap.add_argument("--allocations", type=int, default=1_000_000)
ap.add_argument("--stacks", type=int, default=100_000)
ap.add_argument("--native-frames", type=int, default=20_000,
                help="distinct native addresses, every one resolved")
ap.add_argument("--reps", type=int, default=3)
a = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="cumemtrace-resolve-")
snap = os.path.join(tmp, "big_symbols.json")
gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen_big_snapshot.py")
subprocess.run([sys.executable, gen, "--allocations", str(a.allocations), "--stacks",
                str(a.stacks), "--events", "100000", "--native-frames", str(a.native_frames),
                "--module", a.module, "-o", snap], check=True, capture_output=True)


def report(debuginfo):
    env = dict(os.environ)
    env.pop("CUMEMTRACE_DEBUGINFO", None)
    if not debuginfo:
        env["CUMEMTRACE_DEBUGINFO"] = "off"
    t0 = time.monotonic()
    p = subprocess.Popen([a.cli, "report", snap], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench_resolve: report failed: {p.stderr.read().decode()[-500:]}")
    return wall, ru.ru_utime + ru.ru_stime


on, off = [], []
for _ in range(a.reps):
    on.append(report(True))
    off.append(report(False))

# That resolution really ran: the frames name bench_symbols.c lines.
fl = subprocess.run([a.cli, "flamegraph", "--native-only", snap], capture_output=True,
                    text=True, check=True).stdout
resolved = len({f for line in fl.splitlines() for f in line.split(";")
                if " at bench_symbols.c:" in f})
os.unlink(snap)
os.rmdir(tmp)
print(f"resolved_frames={resolved}")
for i, what in ((0, "wall"), (1, "cpu")):
    added = [x[i] - y[i] for x, y in zip(on, off)]
    print(f"on_{what}={statistics.median(x[i] for x in on):.3f}")
    print(f"off_{what}={statistics.median(y[i] for y in off):.3f}")
    print(f"added_{what}={statistics.median(added):.3f}")
    print(f"added_{what}_min={min(added):.3f}")
    print(f"added_{what}_max={max(added):.3f}")
