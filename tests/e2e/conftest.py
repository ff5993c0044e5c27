"""Shared fixtures for the end-to-end tests: run a program from
tests/progs under LD_PRELOAD=libcumemtrace.so against the simulated device
and load the snapshots it wrote."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from cli_helper import cli  # noqa: E402,F401 (the suites' one CLI runner)
import needs  # noqa: E402

BUILD = pathlib.Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
LIB = BUILD / "libcumemtrace.so"
SIM = BUILD / "sim"
PROGS = BUILD / "tests" / "progs"
CLI = BUILD / "cumemtrace"
MiB = 1 << 20


def _sanitizer_runtime():
    """An instrumented library must come after its sanitizer runtime in
    LD_PRELOAD; find which one (if any) the library needs."""
    out = subprocess.run(["ldd", str(LIB)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        for name in ("libasan.so", "libtsan.so"):
            if name in line and "=>" in line:
                return line.split("=>")[1].split()[0]
    return None


SAN_RUNTIME = _sanitizer_runtime() if LIB.exists() else None


class Result:
    def __init__(self, proc, cwd):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.cwd = cwd
        self.files = sorted(cwd.glob("cumemtrace.*.json"))
        self.snapshots = [json.loads(f.read_text()) for f in self.files]

    def only(self, reason="exit"):
        snaps = [s for s in self.snapshots if s["reason"] == reason]
        assert len(snaps) == 1, (
            f"expected one {reason} snapshot, got {[str(f) for f in self.files]}"
            f"\nstderr:\n{self.stderr}")
        return snaps[0]


def base_env(extra=None, preload=True, extra_preload=(), preload_first=()):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "RANK",
                                "OMPI_", "SLURM_"))}
    env["LD_LIBRARY_PATH"] = str(SIM)
    # The tracer's tests read where the driver placed memory (layouts, gaps,
    # driver-level fragmentation): the simulated device's contiguous
    # placement, an explicit test option (the product maps pages).
    env["SIMCUDA_CONTIGUOUS"] = "1"
    libs = [str(p) for p in preload_first]
    if preload:
        libs.append(str(LIB))
    libs += [str(p) for p in extra_preload]
    if SAN_RUNTIME and libs:
        libs.insert(0, SAN_RUNTIME)
    if libs:
        env["LD_PRELOAD"] = " ".join(libs)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    # Our background thread makes every CUDA process multi-threaded, and a
    # fork child that uses CUDA starts its own (glibc allows it); TSan
    # cannot follow a child that starts threads and kills it by default.
    env.setdefault("TSAN_OPTIONS", "die_after_fork=0")
    if extra:
        env.update(extra)
    return env


def run_env(extra=None):
    """The environment for `cumemtrace run`, which puts the library in
    LD_PRELOAD itself: without it, but with an instrumented build's sanitizer
    runtime, which must come first (as ASan tells a user of such a build) and
    which run keeps first (src/cli/views/run.c)."""
    env = base_env(extra, preload=False)
    if SAN_RUNTIME:
        env["LD_PRELOAD"] = SAN_RUNTIME
    return env


@pytest.fixture
def run(tmp_path):
    """run(args, env=None, preload=True, ...) -> Result, each call in a fresh
    directory under tmp_path (so snapshots of different runs never mix)."""
    counter = [0]

    def _run(args, env=None, check=True, **kw):
        counter[0] += 1
        cwd = tmp_path / f"run{counter[0]}"
        cwd.mkdir()
        args = [str(PROGS / args[0]) if not os.path.isabs(str(args[0])) and
                (PROGS / args[0]).exists() else str(args[0])] + [str(a) for a in args[1:]]
        proc = subprocess.run(args, cwd=cwd, env=base_env(env, **kw),
                              capture_output=True, text=True, timeout=120)
        res = Result(proc, cwd)
        if check:
            assert proc.returncode == 0, (
                f"{args} exited {proc.returncode}\nstdout:\n{proc.stdout}"
                f"\nstderr:\n{proc.stderr}")
        return res
    return _run


# ---- helpers to read snapshots ----

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = 0x82F63B78 ^ (c >> 1) if c & 1 else c >> 1
        t.append(c)
    return t


_CRC32C = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), the checksum of a version 2 stream's records
    (docs/stream-format.md), computed independently of the library's."""
    c, t = 0xFFFFFFFF, _CRC32C
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def device(snap, ordinal=0):
    for d in snap["devices"]:
        if d["ordinal"] == ordinal:
            return d
    raise AssertionError(f"no device {ordinal} in snapshot: "
                         f"{[d['ordinal'] for d in snap['devices']]}")


def stacks(snap):
    return {s["id"]: s for s in snap["stacks"]}


def symbols(snap, stack_id):
    return [f.get("symbol") for f in stacks(snap)[stack_id]["frames"]]


def entry(snap, stack_id):
    return stacks(snap)[stack_id]["entry"]


def groups_by_entry(groups, snap):
    """{entry point name: total bytes} over live/at_peak groups."""
    out = {}
    for g in groups:
        e = entry(snap, g["stack"])
        out[e] = out.get(e, 0) + g["bytes"]
    return out


def bytes_from(groups, snap, symbol):
    """Bytes of the groups whose stack has `symbol` among its frames."""
    return sum(g["bytes"] for g in groups if symbol in symbols(snap, g["stack"]))


# ---- instruction budgets ----

HEADROOM = 0.10  # over the measured figure: a compiler update stays within it, a
                 # regression of a tenth does not


def within_budget(what, value, measured):
    """Prints `value` beside the figure `measured` on the tree (each caller
    says when) and fails when it is more than HEADROOM above it: every
    instruction budget states its measurement and its headroom, the same
    for all."""
    bound = measured * (1 + HEADROOM)
    fmt = "{:,.2f}" if measured < 100 else "{:,.0f}"
    line = (f"{what}: {fmt.format(value)} (measured {measured:,}; budget "
            f"{fmt.format(bound)}, +{HEADROOM:.0%})")
    print(line, file=sys.stderr)
    assert value <= bound, "over budget: " + line


# ---- the slow set: tests that count instructions under callgrind ----
# A module that sets COUNTS_INSTRUCTIONS = True has every test marked
# `instructions`: `make test` runs them, `make test-quick` skips them
# (-m "not instructions").  A module that sets RUNS_NO_C = True (it reads
# sources, docs or scripts and starts nothing we built) has every test
# marked `no_c`: a sanitizer has nothing to watch there, and `make
# test-san` leaves them out (-m "not no_c").

def pytest_configure(config):
    needs.configure(config)
    config.addinivalue_line(
        "markers", "instructions: counts instructions under callgrind (slow); "
        "make test-quick skips these")
    config.addinivalue_line(
        "markers", "no_c: runs none of our C (the library, the CLI, the simulated "
        "device, the test programs): make test-san leaves these out")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if getattr(item.module, "COUNTS_INSTRUCTIONS", False):
            item.add_marker(pytest.mark.instructions)
        if getattr(item.module, "RUNS_NO_C", False):
            item.add_marker(pytest.mark.no_c)


def pytest_runtest_setup(item):
    needs.check(item)
