"""The pip package, as a user gets it: the sdist and the binary
wheel of `make wheel` (CUMEMTRACE_DIST), each installed into a fresh venv
beside PyTorch, then used from that venv alone (PATH = its bin/ and the
base system's, no CUMEMTRACE_* variable, no build tree): `cumemtrace run`
of a real PyTorch script on the simulated GPU, `cumemtrace report`,
`pytest --cumemtrace`, the CUMEMTRACE_LIB override, one version everywhere,
nothing installed outside the venv; for the wheel, ldd of every installed
ELF file names only bundled or manylinux base libraries; for the sdist, a
missing build dependency stops pip with one line naming the package.

PyTorch comes from scripts/torch-env.sh's venv (CUMEMTRACE_TORCH_PYTHON):
the fresh venv is made with the same interpreter and reads torch from that
venv's site-packages through a .pth file, so no GB of wheels are installed
again.  Run by `make test-pip` (slow: it builds the package twice)."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
DIST = pathlib.Path(os.environ.get("CUMEMTRACE_DIST", ROOT / "build" / "dist"))
TORCH_PYTHON = os.environ.get("CUMEMTRACE_TORCH_PYTHON")
TIMEOUT = 600  # a pip install from the sdist compiles the whole project
MiB = 1 << 20


def header_version():
    text = (ROOT / "include" / "cumemtrace.h").read_text()
    return ".".join(re.search(r"^#define CUMEMTRACE_VERSION_%s\s+(\d+)" % k, text, re.M)
                    .group(1) for k in ("MAJOR", "MINOR", "PATCH"))


VERSION = header_version()


def artifact(kind):
    pattern = {"sdist": f"cumemtrace-{VERSION}.tar.gz",
               "wheel": f"cumemtrace-{VERSION}-py3-none-manylinux_*_x86_64.whl"}[kind]
    found = sorted(DIST.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {DIST} (make wheel), found {found}"
    return found[0]


def line_of(path, tag):
    for n, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# @{tag}"):
            return n
    raise AssertionError(f"no '# @{tag}' in {path}")


def run(cmd, env, cwd, timeout=TIMEOUT):
    return subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


class Venv:
    """A fresh venv with the package installed, and torch beside it."""

    def __init__(self, root, kind):
        self.root, self.kind = root, kind
        self.path = root / "venv"
        self.home = root / "home"  # HOME of everything run here
        self.home.mkdir()
        base = run([TORCH_PYTHON, "-c", "import sys; print(sys._base_executable)"],
                   dict(os.environ), root).stdout.strip()
        p = run([base, "-m", "venv", self.path], self.env(), root)
        assert p.returncode == 0, p.stderr
        self.python = self.path / "bin" / "python"
        self.pip = run([self.python, "-m", "pip", "install", "--no-cache-dir",
                        "--disable-pip-version-check", artifact(kind)], self.env(), root)
        assert self.pip.returncode == 0, self.pip.stdout + self.pip.stderr
        self.home_after_install = sorted(self.home.rglob("*"))
        self.site = pathlib.Path(self.py("import sysconfig; print(sysconfig.get_paths()['platlib'])"))
        torch_site = run([TORCH_PYTHON, "-c", "import os, torch; "
                          "print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                         dict(os.environ), root).stdout.strip()
        (self.site / "torch-venv.pth").write_text(torch_site + "\n")

    def env(self, **extra):
        e = {"PATH": f"{self.path}/bin:/usr/bin:/bin", "HOME": str(self.home),
             "LANG": "C.UTF-8", "TMPDIR": str(self.root)}
        e.update(extra)
        return e

    def py(self, code):
        p = run([self.python, "-c", code], self.env(), self.root)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()


@pytest.fixture(scope="module", params=["sdist", "wheel"])
def venv(request, tmp_path_factory):
    if not TORCH_PYTHON:
        pytest.fail("CUMEMTRACE_TORCH_PYTHON is not set: run this suite with `make test-pip`")
    return Venv(tmp_path_factory.mktemp(request.param), request.param)


def test_installs_into_the_venv_only(venv):
    record = next(venv.site.glob("cumemtrace-*.dist-info")) / "RECORD"
    paths = [line.split(",")[0] for line in record.read_text().splitlines() if line]
    assert any(p.endswith("prefix/lib/libcumemtrace.so") for p in paths), paths
    for p in paths:
        where = (venv.site / p).resolve()
        assert where.is_relative_to(venv.path.resolve()), f"{p} installed outside the venv"
    assert (venv.path / "bin" / "cumemtrace").exists()
    assert (venv.path / "bin" / "simgpu").exists()
    assert venv.home_after_install == [], "pip wrote into HOME"


def test_one_version_everywhere(venv):
    cli = run(["cumemtrace", "--version"], venv.env(), venv.root)
    mod = run([venv.python, "-m", "cumemtrace", "--version"], venv.env(), venv.root)
    assert cli.returncode == 0 and mod.returncode == 0, cli.stderr + mod.stderr
    assert cli.stdout == mod.stdout
    assert cli.stdout.split()[:2] == ["cumemtrace", VERSION], cli.stdout
    assert venv.py("import importlib.metadata as m, cumemtrace, pytest_cumemtrace; "
                   "print(m.version('cumemtrace'), cumemtrace.__version__, "
                   "pytest_cumemtrace.__version__)") == f"{VERSION} {VERSION} {VERSION}"


def test_run_torch_then_report(venv):
    out = venv.root / "run"
    out.mkdir()
    script = HERE / "script.py"
    p = run(["simgpu", "--memory", "8GiB", "--", "cumemtrace", "run", "--output", f"{out}/",
             "--", "python", script], venv.env(), out)
    assert p.returncode == 0, p.stderr
    torch = json.loads([l for l in p.stdout.splitlines() if l.startswith("TORCH ")][0][6:])
    files = sorted(out.glob("cumemtrace.*.json"))
    assert len(files) == 1 and str(files[0]) in p.stderr, (files, p.stderr)
    snap = json.loads(files[0].read_text())
    assert snap["process"]["tool_version"] == VERSION
    dev = [d for d in snap["devices"] if d["ordinal"] == 0][0]
    assert dev["peak_bytes"] == torch["max_reserved"]
    # The PyTorch layer came from this installation's share/ (run's PYTHONPATH).
    assert dev["allocator"] is not None, "the PyTorch bootstrap did not run"
    assert dev["allocator"]["allocated_bytes"] == torch["allocated"] == 43 * MiB
    # Native stacks: the frame-rule walk, else glibc's backtrace(); no libunwind.
    assert torch["unwind"] == [], torch

    r = run(["cumemtrace", "report", files[0]], venv.env(), out)
    assert r.returncode == 0, r.stderr
    for tag in ("small", "large"):
        assert f"script.py:{line_of(script, tag)}" in r.stdout, r.stdout


def test_pytest_plugin_from_the_install(venv):
    suite = venv.root / "suite"
    shutil.copytree(HERE / "suite", suite)
    p = run(["simgpu", "--memory", "8GiB", "--", "python", "-m", "pytest", "--cumemtrace",
             "-p", "no:cacheprovider", "-q", "test_budget.py"], venv.env(), suite)
    text = p.stdout + p.stderr
    lib = venv.site / "cumemtrace" / "prefix" / "lib" / "libcumemtrace.so"
    assert f"re-running pytest with LD_PRELOAD={lib}" in text, text
    assert p.returncode == 1, text
    assert re.search(r"\b1 failed, 1 passed\b", text), text
    assert "test_over_budget" in text and "test_within_budget" not in text.split("short test summary")[-1]
    assert f"test_budget.py:{line_of(suite / 'test_budget.py', 'over')}" in text, text


def test_cumemtrace_lib_overrides(venv):
    copy = venv.root / "elsewhere" / "libcumemtrace.so"
    copy.parent.mkdir()
    shutil.copy(venv.site / "cumemtrace" / "prefix" / "lib" / "libcumemtrace.so", copy)
    p = run(["cumemtrace", "run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
            venv.env(CUMEMTRACE_LIB=str(copy)), venv.root)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split(":")[0].strip() == str(copy)

    missing = venv.root / "nowhere" / "libcumemtrace.so"
    p = run(["cumemtrace", "run", "--", "true"], venv.env(CUMEMTRACE_LIB=str(missing)),
            venv.root)
    assert p.returncode == 2
    assert f"CUMEMTRACE_LIB={missing}" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


def manylinux_base_libraries():
    """The sonames a manylinux wheel may take from the system (auditwheel's
    own policy file, in `make wheel`'s tools venv), plus the loader."""
    policy = next(DIST.glob("tools/lib/python3*/site-packages/auditwheel/policy/"
                            "manylinux-policy.json"))
    names = set()
    for p in json.loads(policy.read_text()):
        names.update(p["lib_whitelist"])
    return names | {"linux-vdso.so.1", "ld-linux-x86-64.so.2"}


def test_wheel_carries_its_libraries(venv):
    if venv.kind != "wheel":
        pytest.skip("a build from the sdist links the system's libraries, as it should")
    allowed = manylinux_base_libraries()
    elves = [f for d in ("cumemtrace", "cumemtrace.libs") for f in (venv.site / d).rglob("*")
             if f.is_file() and f.read_bytes()[:4] == b"\x7fELF"]
    assert len(elves) >= 7, elves  # CLI, library, 3 sim, bundled libdw and co.
    for f in elves:
        p = run(["ldd", f], venv.env(), venv.root)
        assert p.returncode == 0, (f, p.stderr)
        for line in p.stdout.splitlines():
            line = line.strip()
            assert "not found" not in line, (f, line)
            name = line.split()[0]
            target = line.split("=>")[1].split()[0] if "=>" in line else name
            inside = os.path.realpath(target).startswith(str(venv.path.resolve()))
            assert inside or os.path.basename(name) in allowed, \
                f"{f.name} needs {line}: neither bundled nor a manylinux base library"


def test_missing_build_dependency_is_one_line(tmp_path):
    """A C compiler on PATH that cannot find zlib.h: pip stops before make,
    with the one line naming zlib1g-dev."""
    if not TORCH_PYTHON:
        pytest.fail("CUMEMTRACE_TORCH_PYTHON is not set: run this suite with `make test-pip`")
    fake = tmp_path / "bin"
    fake.mkdir()
    real_cc = shutil.which("cc")
    (fake / "cc").write_text("#!/bin/sh\n"
                             "# cc without zlib.h: preprocessing stdin that includes it fails\n"
                             "in=$(cat)\n"
                             "case $in in *zlib.h*) echo 'zlib.h: No such file' >&2; exit 1 ;; esac\n"
                             f"printf '%s\\n' \"$in\" | exec {real_cc} \"$@\"\n")
    (fake / "cc").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "TMPDIR": str(tmp_path)}
    base = run([TORCH_PYTHON, "-c", "import sys; print(sys._base_executable)"],
               dict(os.environ), tmp_path).stdout.strip()
    assert run([base, "-m", "venv", tmp_path / "venv"], env, tmp_path).returncode == 0
    p = run([tmp_path / "venv" / "bin" / "python", "-m", "pip", "install", "--no-cache-dir",
             "--disable-pip-version-check", artifact("sdist")], env, tmp_path)
    text = p.stdout + p.stderr
    assert p.returncode != 0, text
    expected = ("cumemtrace: cannot build: missing Debian/Ubuntu packages: zlib1g-dev "
                "(install them with: sudo apt-get install zlib1g-dev)")
    assert [l.strip() for l in text.splitlines() if "cumemtrace: cannot build" in l] == \
        [expected], text
    assert "fatal error" not in text and " -c src/" not in text, "make ran: " + text
