#!/usr/bin/env python3
"""bench_python.py - what Python frames cost per allocation.

A CPython child calls cudaMalloc + cudaFree of the simulated runtime through
ctypes.PyDLL (GIL held) from 30 nested Python frames, PAIRS times, under
LD_PRELOAD=libcumemtrace.so with CUMEMTRACE_PYTHON=0 and =1, runs
interleaved (off, on, off, on, ...) so a busy machine shifts both alike;
medians of REPS runs, and the difference of the best runs (on a small shared
machine the medians of a difference of ~1 us can still swing).  Only cudaMalloc captures a stack, so on - off is the
cost of the Python frames per allocation.  Two shapes:

  steady  the 30 frames stay live and the leaf loops: every frame already
          interned (and, on 3.11+, already has its frame object)
  fresh   every pair comes from a freshly called 30-deep chain, as a new
          forward pass would: 3.11+ creates the frame objects each time

  scripts/bench_python.py --build build [--pairs 100000] [--reps 5]
  scripts/bench_python.py --build build --memray VENV/bin/python
      memray against cumemtrace per allocation, same frames (compare_memray)
  scripts/bench_python.py --build build --instr
      callgrind's instructions per allocation instead of the wall clock
      (count_instructions): repeatable on a busy machine

Prints a table and key=value lines (python_ns_per_alloc_<shape>=N).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DEPTH = 30
SIZE = 2 << 20


def child(build, pairs, shape, gil="held", depth=DEPTH):
    import ctypes
    if shape.startswith("libc-"):
        # what memray records: the system allocator, one Python stack each.
        # memray patches the loaded modules' PLT entries, so a pointer ctypes
        # got from dlsym would bypass it; bytes(n) reaches calloc through
        # CPython's own PyMem_RawCalloc (above pymalloc's 512-byte limit) and
        # its free when the object dies, and 4 KiB keeps the zeroing cheap.
        shape = shape[len("libc-"):]

        def pair():
            bytes(4096)
    else:
        # PyDLL keeps the GIL held during the call, CDLL releases it (as
        # PyTorch does around every op)
        loader = ctypes.PyDLL if gil == "held" else ctypes.CDLL
        lib = loader(os.path.join(build, "sim", "libcudart.so.13"))
        malloc, free = lib.cudaMalloc, lib.cudaFree
        malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        malloc.restype = ctypes.c_int
        free.argtypes = [ctypes.c_void_p]
        free.restype = ctypes.c_int
        ptr = ctypes.c_void_p()
        ref = ctypes.byref(ptr)

        def pair():
            if malloc(ref, SIZE) != 0:
                sys.exit("bench_python: cudaMalloc failed")
            free(ptr)

    def loop(n):
        for _ in range(n):
            pair()

    def nest(depth, fn, *a):
        return fn(*a) if depth == 0 else nest(depth - 1, fn, *a)

    # `nest` adds DEPTH frames; the leaf function is frame DEPTH + 1 or so:
    # close enough to "30 Python frames" and identical in both settings.
    if shape == "steady":
        nest(depth, loop, 1000)  # warm up
        t0 = time.perf_counter_ns()
        nest(depth, loop, pairs)
        t1 = time.perf_counter_ns()
    else:
        for _ in range(1000):
            nest(depth, pair)
        t0 = time.perf_counter_ns()
        for _ in range(pairs):
            nest(depth, pair)
        t1 = time.perf_counter_ns()
    print(f"ns_per_pair={(t1 - t0) / pairs:.1f}")


def parent(args):
    build = os.path.abspath(args.build)
    lib = os.path.join(build, "libcumemtrace.so")
    tmp = tempfile.mkdtemp(prefix="cumemtrace-bench-python-")

    # an instrumented library (make SAN=address) needs its runtime first
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    san = [line.split("=>")[1].split()[0] for line in ldd.splitlines()
           if "=>" in line and ("libasan.so" in line or "libtsan.so" in line)]
    preload = " ".join(san + [lib])

    def run(shape, python):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_PRELOAD"))}
        env.update(LD_LIBRARY_PATH=os.path.join(build, "sim"), LD_PRELOAD=preload,
                   CUMEMTRACE_OUTPUT=tmp + "/", CUMEMTRACE_PYTHON=python,
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "detect_leaks=0"))
        out = subprocess.run([sys.executable, os.path.abspath(__file__),
                              "--child", shape, "--build", build,
                              "--pairs", str(args.pairs)],
                             env=env, capture_output=True, text=True,
                             timeout=600)
        if out.returncode != 0:
            sys.exit(f"bench_python: child failed:\n{out.stdout}{out.stderr}")
        return float(out.stdout.split("ns_per_pair=")[1].split()[0])

    print(f"cumemtrace bench_python: {sys.version.split()[0]}, {args.pairs} "
          f"cudaMalloc+cudaFree pairs via ctypes.PyDLL, {DEPTH} nested Python "
          f"frames, median of {args.reps}")
    for shape in ("steady", "fresh"):
        off, on = [], []
        for _ in range(args.reps):
            off.append(run(shape, "0"))
            on.append(run(shape, "1"))
        m_off, m_on = statistics.median(off), statistics.median(on)
        best = min(on) - min(off)  # the least disturbed runs of each side
        print(f"  {shape}: python frames off: {m_off:8.0f} ns/pair  "
              f"({min(off):.0f}-{max(off):.0f})")
        print(f"  {shape}: python frames: {m_on:12.0f} ns/pair  "
              f"({min(on):.0f}-{max(on):.0f})  -> {m_on - m_off:+.0f} ns "
              f"per allocation (medians), {best:+.0f} (best runs)")
        print(f"python_ns_per_alloc_{shape}={m_on - m_off:.0f}")
        print(f"python_ns_per_alloc_{shape}_best={best:.0f}")
        diffs = [b - a for a, b in zip(off, on)]  # per interleaved repetition
        print(f"python_ns_per_alloc_{shape}_min={min(diffs):.0f}")
        print(f"python_ns_per_alloc_{shape}_max={max(diffs):.0f}")


def compare_memray(args):
    """memray against cumemtrace, in-loop, interleaved, same interpreter, same
    30 Python frames, same ctypes call shape: memray (its default: Python
    frames, the system allocator) over a loop of calloc+free (bytes(4096)), cumemtrace
    (CUMEMTRACE_PYTHON=1) over the same loop of cudaMalloc+cudaFree; each
    minus the same loop untraced.  memray writes its records from the
    allocating thread, so its cost is in the loop's time."""
    build = os.path.abspath(args.build)
    lib = os.path.join(build, "libcumemtrace.so")
    tmp = tempfile.mkdtemp(prefix="cumemtrace-bench-memray-")
    py = args.memray
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_PRELOAD", "MEMRAY"))}
    base["LD_LIBRARY_PATH"] = os.path.join(build, "sim")
    me = [os.path.abspath(__file__), "--build", build, "--pairs", str(args.pairs)]

    def run(which, n):
        env = dict(base)
        if which.startswith("memray"):
            native = ["--native"] if which == "memray-native" else []
            argv = [py, "-m", "memray", "run", "--quiet", "--force"] + native + [
                "-o", os.path.join(tmp, f"memray.{n}.bin")] + me + ["--child", "libc-steady"]
        elif which == "libc":
            argv = [py] + me + ["--child", "libc-steady"]
        else:
            argv = [py] + me + ["--child", "steady"]
            if which == "ours":
                env.update(LD_PRELOAD=lib, CUMEMTRACE_OUTPUT=tmp + "/",
                           CUMEMTRACE_PYTHON="1", CUMEMTRACE_STREAM="off")
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            sys.exit(f"bench_python: {which} child failed:\n{out.stdout}{out.stderr[-2000:]}")
        for f in os.listdir(tmp):
            if f.startswith("memray."):
                os.unlink(os.path.join(tmp, f))
        return float(out.stdout.split("ns_per_pair=")[1].split()[0])

    def show(name, xs, fmt=".0f"):
        xs = [x for x in xs if x == x]
        if xs:
            print(f"{name}_min={min(xs):{fmt}}")
            print(f"{name}={statistics.median(xs):{fmt}}")
            print(f"{name}_max={max(xs):{fmt}}")

    mem, nat, ours, ratio, ratio_nat = [], [], [], [], []
    for n in range(args.reps):
        libc, m = run("libc", n), run("memray", n)
        mn = run("memray-native", n)
        cuda, o = run("cuda", n), run("ours", n)
        mem.append(m - libc)
        nat.append(mn - libc)
        ours.append(o - cuda)
        ratio.append((o - cuda) / (m - libc) if m > libc else float("nan"))
        ratio_nat.append((o - cuda) / (mn - libc) if mn > libc else float("nan"))
    show("memray_ns_per_pair", mem)
    show("memray_native_ns_per_pair", nat)
    show("ours_ns_per_pair", ours)
    show("ratio", ratio, ".2f")
    show("ratio_native", ratio_nat, ".2f")


def count_instructions(args):
    """What Python frames add per allocation, in instructions (callgrind):
    each shape runs with CUMEMTRACE_PYTHON=0 and =1 at two loop lengths,
    and the slope of (on - off) over the extra pairs is the cost of one
    allocation - start-up, warm-up and the exit snapshot cancel out."""
    if shutil.which("valgrind") is None:
        sys.exit("bench_python: --instr needs valgrind (apt-get install valgrind)")
    build = os.path.abspath(args.build)
    lib = os.path.join(build, "libcumemtrace.so")
    tmp = tempfile.mkdtemp(prefix="cumemtrace-bench-python-instr-")
    short, long_ = 500, 500 + args.instr_pairs

    def count(shape, python, pairs):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_PRELOAD"))}
        env.update(LD_LIBRARY_PATH=os.path.join(build, "sim"), LD_PRELOAD=lib,
                   CUMEMTRACE_OUTPUT=tmp + "/", CUMEMTRACE_PYTHON=python,
                   CUMEMTRACE_STREAM="off", PYTHONHASHSEED="0")
        out = subprocess.run(["valgrind", "--tool=callgrind",
                              "--callgrind-out-file=/dev/null", sys.executable,
                              os.path.abspath(__file__), "--child", shape,
                              "--build", build, "--pairs", str(pairs)],
                             env=env, capture_output=True, text=True, timeout=900)
        m = re.search(r"Collected : (\d+)", out.stderr)
        if out.returncode != 0 or m is None:
            sys.exit(f"bench_python: callgrind run failed:\n{out.stderr[-2000:]}")
        return int(m.group(1))

    print(f"cumemtrace bench_python --instr: {sys.version.split()[0]}, {DEPTH} nested "
          f"Python frames, callgrind, slope over {short} and {long_} pairs")
    for shape in ("steady", "fresh"):
        c = {(py, n): count(shape, py, n) for py in ("0", "1") for n in (short, long_)}
        off = (c[("0", long_)] - c[("0", short)]) / (long_ - short)
        on = (c[("1", long_)] - c[("1", short)]) / (long_ - short)
        print(f"  {shape}: python frames off {off:.0f} instructions/pair, on {on:.0f}: "
              f"{on - off:+.0f} per allocation")
        print(f"python_instr_per_alloc_{shape}={on - off:.0f}")


def capture_instructions(args):
    """What one capture of 30 Python frames costs inside python_merge (the
    Python side: reading the frames, matching the thread's last stack,
    splicing), with the GIL held and released, in instructions: callgrind
    counting only inside python_merge, the slope between two loop lengths
    (tests/e2e/test_python_cost.py does the same)."""
    if shutil.which("valgrind") is None:
        sys.exit("bench_python: --capture-instr needs valgrind")
    build = os.path.abspath(args.build)
    tmp = tempfile.mkdtemp(prefix="cumemtrace-bench-capture-")

    def count(gil, pairs):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_PRELOAD"))}
        env.update(LD_LIBRARY_PATH=os.path.join(build, "sim"),
                   LD_PRELOAD=os.path.join(build, "libcumemtrace.so"),
                   CUMEMTRACE_OUTPUT=tmp + "/", CUMEMTRACE_STREAM="off", PYTHONHASHSEED="0")
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                              "--collect-atstart=no", "--toggle-collect=python_merge",
                              sys.executable, os.path.abspath(__file__), "--child", "steady",
                              "--gil", gil, "--depth", str(DEPTH - 6), "--build", build,
                              "--pairs", str(pairs)],
                             env=env, capture_output=True, text=True, timeout=900)
        m = re.search(r"Collected : (\d+)", out.stderr)
        if out.returncode != 0 or m is None:
            sys.exit(f"bench_python: callgrind run failed:\n{out.stderr[-2000:]}")
        return int(m.group(1))

    short, long_ = 500, 2500
    for gil in ("held", "released"):
        per = (count(gil, long_) - count(gil, short)) / (long_ - short)
        print(f"python_capture_instr_{gil}={per:.0f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--child", choices=("steady", "fresh", "libc-steady"))
    ap.add_argument("--depth", type=int, default=DEPTH,
                    help="the child's nesting: Python frames at cudaMalloc = depth + 6 "
                         "(nest's depth + 1, loop or pair, pair, child, main, <module>)")
    ap.add_argument("--gil", choices=("held", "released"), default="held",
                    help="the child's calls keep the GIL (ctypes.PyDLL) or release "
                         "it (ctypes.CDLL)")
    ap.add_argument("--instr", action="store_true",
                    help="count instructions with callgrind instead of timing")
    ap.add_argument("--instr-pairs", type=int, default=2000,
                    help="with --instr: the extra pairs of the longer runs")
    ap.add_argument("--capture-instr", action="store_true",
                    help="instructions of one capture of 30 Python frames inside "
                         "python_merge, GIL held and released (callgrind)")
    ap.add_argument("--memray", metavar="PYTHON",
                    help="compare with memray, run by this interpreter (which has it)")
    args = ap.parse_args()
    if args.child:
        child(os.path.abspath(args.build), args.pairs, args.child, args.gil, args.depth)
    elif args.capture_instr:
        capture_instructions(args)
    elif args.instr:
        count_instructions(args)
    elif args.memray:
        compare_memray(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
