"""What Python frames cost per allocation, in instructions:
30 Python frames, with the GIL held (ctypes.PyDLL) and released
(ctypes.CDLL, as PyTorch runs its ops), each at most 2,000 instructions a
capture.  Counted by callgrind inside python_merge only (the Python side
of a capture: reading the frames, matching the thread's last stack,
splicing), as the slope between two loop lengths so the first captures
(the layout's proof, interning) cancel out.  Before, a capture
without the GIL went through CPython's fault-handler dumper: ~109,000
instructions at 34 frames."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, LIB, ROOT, SAN_RUNTIME, SIM, within_budget
from needs import DEPS, needs

PYTHON = os.environ.get("CUMEMTRACE_TEST_PYTHON", "/usr/bin/python3")
BENCH = ROOT / "scripts" / "bench_python.py"
COUNTS_INSTRUCTIONS = True  # conftest.py: marked `instructions`, make test-quick skips
DEPTH = 24  # bench_python's nesting for 30 Python frames at cudaMalloc
# instructions a capture at 30 frames, measured on the tree of 2026-12-07
MEASURED = {"held": 1679, "released": 1844}

pytestmark = [
    pytest.mark.skipif(SAN_RUNTIME is not None,
                       reason="valgrind cannot run sanitizer-instrumented code"),
    needs(os.access(PYTHON, os.X_OK), f"CPython at {PYTHON}", DEPS + " (python3)"),
]


def _minor():
    out = subprocess.run([PYTHON, "-c", "import sys; print(sys.version_info[1])"],
                         capture_output=True, text=True).stdout.strip()
    return int(out) if out else 0


def count(tmp_path, gil, pairs):
    """Instructions inside python_merge over one run, and its snapshot."""
    assert shutil.which("valgrind"), "valgrind not found: run scripts/install-deps.sh"
    out = tmp_path / f"{gil}.{pairs}"
    out.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_PRELOAD"))}
    env.update(LD_LIBRARY_PATH=str(SIM), LD_PRELOAD=str(LIB),
               CUMEMTRACE_OUTPUT=f"{out}/", CUMEMTRACE_STREAM="off", PYTHONHASHSEED="0")
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        "--collect-atstart=no", "--toggle-collect=python_merge",
                        PYTHON, str(BENCH), "--child", "steady", "--gil", gil,
                        "--depth", str(DEPTH), "--build", str(BUILD),
                        "--pairs", str(pairs)],
                       env=env, capture_output=True, text=True, timeout=300)
    m = re.search(r"Collected : (\d+)", r.stderr)
    assert r.returncode == 0 and m, r.stderr[-2000:]
    snap = json.loads(next(out.glob("cumemtrace.*.json")).read_text())
    return int(m.group(1)), snap


@pytest.mark.parametrize("gil", ["held", "released"])
def test_thirty_python_frames_cost_what_was_measured(tmp_path, gil):
    if _minor() < 11 or _minor() > 13:
        pytest.skip("the direct reader knows CPython 3.11-3.13's structs")
    short, long_ = 500, 2500
    a, _ = count(tmp_path, gil, short)
    b, snap = count(tmp_path, gil, long_)
    per = (b - a) / (long_ - short)
    found = [s for s in snap["stacks"] if s["entry"] == "cudaMalloc"]
    assert found
    for stack in found:  # the warm-up's and the timed loop's
        py = [f for f in stack["frames"] if f.get("module") == "python"]
        assert len(py) == 30, [f.get("function") for f in py]
        assert not [f for f in stack["frames"] if "marker" in f], stack["frames"]
    within_budget(f"python frames, GIL {gil}, instructions a capture at 30 frames", per,
                  MEASURED[gil])
