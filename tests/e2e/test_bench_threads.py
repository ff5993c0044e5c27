"""make bench's thread-scaling part (scripts/bench.py --only threads):
its targets come out judged on the run that printed them, and never met where
the machine could not show them - N threads on fewer than N cores, or a bare
stand-in that did not itself reach the ratio - and the instructions per pair
at 2 threads stand beside one thread's."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT, SAN_RUNTIME

COUNTS_INSTRUCTIONS = True  # conftest.py: marked `instructions` (callgrind runs)

pytestmark = pytest.mark.skipif(
    SAN_RUNTIME is not None, reason="valgrind cannot run sanitizer-instrumented code")

TARGET = re.compile(r"^  (met|MISSED|not measurable|not measured)\s+threads: (\d+) threads "
                    r">= ([\d.]+) x 1 thread on a lock-free runtime: (.*)$", re.M)
BARE = re.compile(r"bare stand-in ([\d.]+) x")


def test_thread_targets_are_judged_on_what_the_machine_showed():
    assert shutil.which("valgrind"), "valgrind not found: run scripts/install-deps.sh"
    assert (BUILD / "bench" / "fastrt" / "libcudart.so.13").exists()
    p = subprocess.run([sys.executable, ROOT / "scripts" / "bench.py", "--build", BUILD,
                        "--quick", "--only", "threads"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    # instructions per pair at 2 threads, beside one thread's
    m = re.search(r"2 threads .*?instr  added per pair (\d+) \(1 thread (\d+);", out, re.S)
    assert m, out
    assert int(m.group(1)) > 0 and int(m.group(2)) > 0
    # CPU / wall / N: how much of the loops the threads ran at once
    assert re.search(r"2 threads .*?ran together [\d.]+ \[[\d.]+-[\d.]+\] of the loops", out,
                     re.S), out
    rows = TARGET.findall(out)
    assert sorted((int(n), float(x)) for _, n, x, _ in rows) == [(2, 1.6), (4, 2.5)], out
    for state, n, x, text in rows:
        n, x = int(n), float(x)
        bare = float(BARE.search(text).group(1))
        if os.cpu_count() < n:  # fewer cores than threads: not judged, and why
            assert state == "not measurable", text
            assert f"{os.cpu_count()} cores: {n} threads cannot run at once" in text, text
        if state == "met":
            assert bare >= x, text
        if state == "not measurable" and os.cpu_count() >= n:
            assert f"reached only {bare:.2f} x" in text, text
        if state == "MISSED" and "free cores" in text:
            bound = float(re.search(r"at most ([\d.]+) x", text).group(1))
            assert bound < x, text
