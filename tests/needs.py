"""What a test needs from the machine (a tool, a package, a built file),
said one way: without it the test is skipped with one line naming it and
how to install it - and under CI=true it fails with that line instead, so
that a CI machine lacking a tool cannot pass without testing what the tool
checks (.ci/run installs every one with scripts/install-deps.sh --ci).
Both suites' conftest.py put this directory on sys.path and act on the
mark needs() returns."""
import os

import pytest

CI = os.environ.get("CI", "").lower() in ("true", "1")
DEPS = "scripts/install-deps.sh --ci installs it"
TORCH_VENV = "scripts/torch-env.sh makes it (make test-torch does)"


def missing(what, install):
    """Ends the running test for want of `what`: skipped, or failed under
    CI=true; `install` says how to get it."""
    line = f"{what} is missing: {install}"
    if CI:
        pytest.fail(f"{line} (CI=true: a missing tool fails the run)", pytrace=False)
    pytest.skip(line)


def needs(available, what, install):
    """A mark (for a test, or a module's pytestmark) saying the test needs
    `what`: when `available` is false, setup calls missing()."""
    return pytest.mark.needs(bool(available), what, install)


def check(item):
    """pytest_runtest_setup's part: acts on each needs() mark of item."""
    for m in item.iter_markers("needs"):
        available, what, install = m.args
        if not available:
            missing(what, install)


def configure(config):
    config.addinivalue_line(
        "markers", "needs(available, what, install): skip without it, fail under CI=true")
