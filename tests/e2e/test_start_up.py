"""What the preload costs a process before (and whether) it uses CUDA: the
library's constructor runs in every process a
shell script starts, so it does nothing costly - no clock calibration, no
native unwinder set-up - and nothing in it waits on a clock that may not move."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import LIB, PROGS, SAN_RUNTIME, base_env, within_budget
from needs import DEPS, missing

FAKETIME = pathlib.Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
FROZEN = {"FAKETIME": "2020-01-01 00:00:00"}


def faketime():
    if not FAKETIME.exists():
        missing(f"Debian's faketime ({FAKETIME})", DEPS)
    return FAKETIME


def bare_runs_under_faketime():
    """Whether `date` finishes under libfaketime with only the sanitizer
    runtime preloaded, without us: GCC 12's libasan does not (it waits on
    the frozen clock itself), so a sanitizer build cannot test ours."""
    env = dict(os.environ, FAKETIME=FROZEN["FAKETIME"],
               LD_PRELOAD=f"{SAN_RUNTIME}:{faketime()}")
    try:
        subprocess.run(["date", "+%Y"], env=env, capture_output=True, timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_a_process_without_cuda_finishes_under_a_frozen_clock(tmp_path):
    """libfaketime behind us freezes CLOCK_MONOTONIC: the constructor's
    calibration spin waited for it to move, forever (`date` at 100 % of a
    core)."""
    if SAN_RUNTIME and not bare_runs_under_faketime():
        pytest.skip(f"{os.path.basename(SAN_RUNTIME)} hangs under libfaketime without "
                    "cumemtrace too: tested by the plain build")
    env = base_env(FROZEN, extra_preload=[faketime()])
    p = subprocess.run(["date", "+%Y"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0 and p.stdout.strip() == "2020", (p.stdout, p.stderr)
    assert list(tmp_path.iterdir()) == []


def test_a_cuda_process_finishes_under_a_frozen_clock(tmp_path):
    """At the first CUDA call the clock is calibrated; with a clock that
    never moves that gives up (readings are CLOCK_MONOTONIC, as without an
    invariant TSC) instead of spinning."""
    env = base_env(FROZEN, extra_preload=[faketime()])
    p = subprocess.run([str(PROGS / "rt_workload"), "basic"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.stdout, p.stderr)
    snaps = [json.loads(f.read_text()) for f in tmp_path.glob("cumemtrace.*.json")]
    assert len(snaps) == 1, (list(tmp_path.iterdir()), p.stderr)
    assert snaps[0]["devices"][0]["peak_bytes"] > 0


def test_a_process_without_cuda_loads_no_unwinder(tmp_path):
    """backtrace()'s unwinder (libgcc_s) is loaded and warmed up at the first
    CUDA call, not by the constructor of every process; libunwind never."""
    p = subprocess.run(["cat", "/proc/self/maps"], env=base_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=20, check=True)
    assert str(LIB) in p.stdout
    # a sanitizer's runtime loads libgcc_s itself
    names = ("libunwind",) if SAN_RUNTIME else ("libunwind", "libgcc_s")
    loaded = [line for line in p.stdout.splitlines() if any(n in line for n in names)]
    assert loaded == [], loaded


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_the_constructor_costs_little(tmp_path):
    """Measured with callgrind on /bin/true: the constructor cost 420,134
    instructions (93 % of them loading and warming libunwind, which the
    library no longer uses), plus a
    quarter-millisecond calibration spin on an invariant TSC."""
    assert shutil.which("valgrind"), "valgrind not found: run scripts/install-deps.sh"
    out = tmp_path / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    "--collect-atstart=no", "--toggle-collect=cumemtrace_load",
                    "/bin/true"], env=base_env(), check=True, capture_output=True,
                   timeout=120)
    text = subprocess.run(["callgrind_annotate", str(out)], check=True,
                          capture_output=True, text=True).stdout
    total = next(int(line.split()[0].replace(",", ""))
                 for line in text.splitlines() if "PROGRAM TOTALS" in line)
    assert total > 0
    within_budget("constructor, instructions", total, 30_483)  # the tree of 2026-12-07
