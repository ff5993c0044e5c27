"""A test that lacks a tool (tests/needs.py) is skipped with one line
naming the tool and how to install it - and fails with that line under
CI=true, so that a CI machine without the tool cannot pass untested."""
import pathlib
import re

import pytest

pytest_plugins = ["pytester"]

TESTS = pathlib.Path(__file__).resolve().parents[1]

INNER = f'''
import sys
sys.path.insert(0, {str(TESTS)!r})
import needs
import pytest

RUNS_NO_C = True  # runs pytest on its own small suites


def pytest_configure(config):
    needs.configure(config)


def pytest_runtest_setup(item):
    needs.check(item)
'''

TESTS_FILE = '''
import pytest
from needs import missing, needs


@needs(False, "frobnicator", "apt-get install frobnicator")
def test_marked():
    pass


def test_called():
    missing("gizmo", "pip install gizmo")


@needs(True, "present", "nothing to do")
def test_present():
    pass
'''


def run(pytester, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    pytester.makeconftest(INNER)
    pytester.makepyfile(test_inner=TESTS_FILE)
    return pytester.runpytest_subprocess("-rA", "-p", "no:cacheprovider", timeout=60)


@pytest.mark.parametrize("ci", [None, "false", ""])
def test_a_missing_tool_skips_outside_ci(pytester, monkeypatch, ci):
    r = run(pytester, monkeypatch, ci)
    r.assert_outcomes(passed=1, skipped=2)
    out = r.stdout.str()
    assert "frobnicator is missing: apt-get install frobnicator" in out, out
    assert "gizmo is missing: pip install gizmo" in out, out


@pytest.mark.parametrize("ci", ["true", "1"])
def test_a_missing_tool_fails_under_ci(pytester, monkeypatch, ci):
    r = run(pytester, monkeypatch, ci)
    r.assert_outcomes(passed=1, failed=1, errors=1)  # the mark fails setup, the call the test
    out = r.stdout.str()
    for line in ("frobnicator is missing: apt-get install frobnicator (CI=true: a missing "
                 "tool fails the run)", "gizmo is missing: pip install gizmo (CI=true"):
        assert line in out, out


def test_the_suites_skip_for_a_missing_tool_only_through_needs():
    """A skip on a missing tool written by hand would pass a CI machine
    without the tool.  The skips left say why the test cannot mean anything
    here whatever is installed: a sanitizer build under valgrind, a real
    GPU, NVIDIA's own toolkit (not in Debian: scripts/gpu-check runs those),
    root or a namespace the machine refuses, a machine too loaded to time."""
    allowed = re.compile(r"SAN_RUNTIME|REAL|nvcc|NVIDIA|CUDA_INCLUDE|CUDA 13|unshare|_unshare"
                         r"|root|tmpfs|too loaded|CPython 3\.11|paced for|peak_tensors|sdist|why\)")
    found = []
    for p in sorted((TESTS / "e2e").glob("*.py")) + sorted((TESTS / "torch").rglob("*.py")):
        lines = p.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.search(r"pytest\.skip\(|skipif\(|importorskip\(", line) and \
                    p.name != "test_needs.py":
                text = " ".join(lines[i:i + 4])
                if not allowed.search(text):
                    found.append(f"{p.relative_to(TESTS)}:{i + 1}: {line.strip()}")
    assert not found, "skips on a missing tool outside tests/needs.py:\n" + "\n".join(found)
