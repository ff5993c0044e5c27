"""scripts/install-deps.sh covers what the README's first command needs:
`make demo` makes a PyTorch venv (scripts/torch-env.sh), which on Debian
needs python3-venv - a package a fresh machine lacks and that the build's
own list does not name."""
import subprocess

from conftest import ROOT

RUNS_NO_C = True  # reads the install script and the Makefile


def test_make_demo_checks_for_what_the_torch_venv_needs():
    dry = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert "scripts/install-deps.sh --torch" in dry.stdout, dry.stdout
    traced = subprocess.run(["sh", "-x", str(ROOT / "scripts" / "install-deps.sh"),
                             "--check", "--torch"], capture_output=True, text=True, timeout=60)
    assert "unknown option" not in traced.stderr, traced.stderr
    checked = [l for l in traced.stderr.splitlines() if l.startswith("+ need python3-venv ")]
    assert checked and "import venv, ensurepip" in checked[0], traced.stderr
