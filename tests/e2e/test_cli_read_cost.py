"""What reading a snapshot costs the CLI, per byte of the file (issue 14:
`report` of 1 M live allocations / 100 k stacks took 0.79 s CPU, `diff` of
two 1.47 s).  Counted in instructions under callgrind on a generated
snapshot of the same shape, smaller: exact on a loaded machine, where
timings are not.  The reader spent ~1800 instructions on each frame
object, most of which repeat byte for byte in other stacks."""
import re
import shutil
import subprocess
import sys

import pytest

from conftest import CLI, ROOT, SAN_RUNTIME


def inclusive(annotated, fn):
    m = re.search(r"^\s*([\d,]+) .*:%s \[" % fn, annotated, re.M)
    assert m, f"no count for {fn} in:\n{annotated}"
    return int(m.group(1).replace(",", ""))


def read_cost(tmp_path, snap, *argv):
    out = tmp_path / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    "--collect-atstart=no", "--toggle-collect=snapshot_read_mem",
                    str(CLI), *argv, str(snap)],
                   check=True, capture_output=True, timeout=300)
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)],
                               check=True, capture_output=True, text=True).stdout
    return inclusive(annotated, "snapshot_read_mem")


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_reading_costs_few_instructions_per_byte(tmp_path):
    assert shutil.which("valgrind"), "valgrind not found: run scripts/install-deps.sh"
    snap = tmp_path / "s.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_big_snapshot.py"),
                    "--allocations", "50000", "--stacks", "5000", "--events", "5000",
                    "-o", str(snap)], check=True, capture_output=True, timeout=120)
    size = snap.stat().st_size
    per_byte = read_cost(tmp_path, snap, "report") / size
    print(f"snapshot_read_mem: {per_byte:.1f} instructions per byte of a {size} byte file")
    # 43 before frames were memoised by their bytes, 25 after.
    assert per_byte <= 32, per_byte
