"""`make demo-torch` (scripts/demo-torch.sh) as a new user sees it: PyTorch's
traceback folded to its error line, and nothing of ours hidden - the list of
files each run wrote stays (`grep -v '^  '` hid it); with
numpy in the venv (scripts/torch-env.sh) no "Failed to initialize NumPy"."""
import re
import subprocess
import sys

from conftest import BUILD, REAL, ROOT

import pytest


@pytest.mark.skipif(REAL, reason="the demo runs on the simulated GPU")
def test_demo_shows_the_files_written_and_no_traceback():
    p = subprocess.run([str(ROOT / "scripts" / "demo-torch.sh"), str(BUILD), sys.executable],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = p.stdout + p.stderr
    oom_run = out[out.index("== 2."):out.index("== 3.")]
    assert "torch.OutOfMemoryError: CUDA out of memory" in oom_run, oom_run
    assert "Traceback" not in oom_run and '  File "' not in oom_run, oom_run
    listed = re.findall(r"^  (\S+\.json)  \((oom|exit), pid \d+\)$", oom_run, re.M)
    assert [k for _, k in listed] == ["oom", "exit"], oom_run
    assert "2 snapshots written:" in oom_run
    assert "Failed to initialize NumPy" not in out, out
