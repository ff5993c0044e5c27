"""Golden tests of the command-line tool: tests/golden/<case>/ holds `cmd`
(the arguments, shell-quoted), `stdout` (expected output), and optionally
`stderr` (expected, exact; otherwise stderr must be empty) and `status`
(expected exit status; otherwise 0).  The case runs in its own directory so
paths in the output are short and stable; inputs live in tests/golden/inputs/
(see gen_inputs.py there).

Set CUMEMTRACE_GOLDEN_UPDATE=1 to rewrite the expected files from the current
output; then review `git diff tests/golden` before committing.
"""
import difflib
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from needs import needs

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
CLI = BUILD / "cumemtrace"
GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("CUMEMTRACE_GOLDEN_UPDATE") == "1"

CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "cmd").is_file())


def run_case(case):
    d = GOLDEN / case
    args = shlex.split((d / "cmd").read_text())
    env = dict(os.environ, NO_COLOR="1")
    return args, subprocess.run([str(CLI)] + args, cwd=d, env=env, capture_output=True,
                                text=True, timeout=60)


def unified(expected, actual, name):
    return "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                        f"expected/{name}", f"actual/{name}"))


def check(path, actual, what):
    if UPDATE:
        if actual or path.name == "stdout":
            path.write_text(actual)
        elif path.exists():
            path.unlink()
        return
    expected = path.read_text() if path.exists() else ""
    assert actual == expected, f"{what} differs:\n" + unified(expected, actual, path.name)


def is_text_view(args):
    """Human views must fit 80 columns (exact byte counts may widen them,
    and --width / --full ask for another width)."""
    if args[0] not in ("report", "diff", "timeline"):
        return False
    return not ({"--json", "--bytes", "chrome", "--width", "--full"} & set(args))


@needs(CLI.exists(), f"{CLI}", "make cli builds it")
@pytest.mark.parametrize("case", CASES)
def test_golden(case):
    d = GOLDEN / case
    args, r = run_case(case)
    check(d / "stdout", r.stdout, "stdout")
    check(d / "stderr", r.stderr, "stderr")
    status_file = d / "status"
    if UPDATE:
        if r.returncode:
            status_file.write_text(f"{r.returncode}\n")
        elif status_file.exists():
            status_file.unlink()
        return
    want = int(status_file.read_text()) if status_file.exists() else 0
    assert r.returncode == want, f"exit status {r.returncode}, expected {want}\n{r.stderr}"
    if want == 2:
        # An input or usage error: one line on stderr, nothing on stdout.
        assert r.stdout == ""
        assert r.stderr.count("\n") == 1, r.stderr
    if is_text_view(args):
        for n, line in enumerate(r.stdout.splitlines(), 1):
            assert len(line) <= 80, f"line {n} is {len(line)} columns: {line!r}"
