"""`make demo` (scripts/demo.sh) as a new user sees it: PyTorch's traceback
folded to its error line, and nothing of ours hidden - the list of files
each run wrote stays (a `grep -v '^  '` once hid it); with numpy in the venv
(scripts/torch-env.sh) no "Failed to initialize NumPy".  The README quotes
the demo's post-mortem: it must be what the demo prints today."""
import re
import subprocess
import sys

from conftest import BUILD, REAL, ROOT

import pytest

pytestmark = pytest.mark.skipif(REAL, reason="the demo runs on the simulated GPU")


@pytest.fixture(scope="module")
def demo():
    p = subprocess.run([str(ROOT / "scripts" / "demo.sh"), str(BUILD), sys.executable],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout + p.stderr


def test_demo_shows_the_files_written_and_no_traceback(demo):
    out = demo
    oom_run = out[out.index("== 2."):out.index("== 3.")]
    assert "torch.OutOfMemoryError: CUDA out of memory" in oom_run, oom_run
    assert "Traceback" not in oom_run and '  File "' not in oom_run, oom_run
    listed = re.findall(r"^  (\S+\.json)  \((oom|exit), pid \d+\)$", oom_run, re.M)
    assert [k for _, k in listed] == ["oom", "exit"], oom_run
    assert "2 snapshots written:" in oom_run
    assert "Failed to initialize NumPy" not in out, out


def same_run(lines):
    """What differs from one run of the demo to the next - the time since
    the start and the thread's id - made equal; every figure stays."""
    return [re.sub(r"\bthread \d+", "thread N", re.sub(r"\bat \d+\.\d+ s\b", "at T s", l))
            for l in lines]


def readme_post_mortem():
    """The README's indented block that starts with the post-mortem's
    heading, unindented."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("    OUT OF MEMORY on device"))
    block = []
    for l in lines[start:]:
        if l and not l.startswith("    "):
            break
        block.append(l[4:])
    while block and not block[-1]:
        block.pop()
    return block


def test_the_readme_quotes_the_post_mortem_the_demo_prints(demo):
    """The README's example is the report of the demo's OOM, line for line:
    from its heading to the end of its advice (the sections that follow are
    not quoted).  Figures are checked exactly: the simulated card and the
    script make them the same at every run."""
    quoted = readme_post_mortem()
    report = demo[demo.index("== 3."):demo.index("== 4.")].splitlines()
    start = next(i for i, l in enumerate(report) if l.startswith("OUT OF MEMORY on device"))
    printed = report[start:start + len(quoted)]
    assert same_run(quoted) == same_run(printed), "\n".join(printed)
    # the quote ends where the advice does: the next line starts another section
    rest = report[start + len(quoted):]
    assert not rest or not rest[0] or not rest[0].startswith("  "), rest[:2]
    assert "Holders at the failure" in "\n".join(quoted) and "Advice" in quoted
