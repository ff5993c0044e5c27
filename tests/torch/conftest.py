"""Real PyTorch (the PyPI CUDA wheel) on the simulated GPU, under the tracer.

Run by `make test-torch` with the python of scripts/torch-env.sh's venv.
Each scenario is a script in scenarios/ that prints PyTorch's own figures as
one JSON line ("TORCH {...}"); a test runs it twice through scripts/simgpu -
bare, and under `cumemtrace run` - and requires the same output and exit
status from both, then judges the tracer's snapshot against PyTorch's
figures.  Nothing here imports torch except the report header.

CUMEMTRACE_TORCH_REAL=1 (scripts/gpu-check) runs the same scenarios on a
real GPU: no simgpu, the `memory` of a scenario ignored (the scenarios size
themselves from the card), sim-only assertions skipped."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from cli_helper import cli  # noqa: E402,F401 (the suites' one CLI runner)
import needs  # noqa: E402

BUILD = pathlib.Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
SIMGPU = ROOT / "scripts" / "simgpu"
CLI = BUILD / "cumemtrace"
SCENARIOS = pathlib.Path(__file__).resolve().parent / "scenarios"
MiB = 1 << 20
GiB = 1 << 30
TIMEOUT = 120  # one run; the whole suite stays far below 5 minutes
REAL = os.environ.get("CUMEMTRACE_TORCH_REAL") == "1"


def torch_versions():
    """(torch version, CUDA version the wheel was built for), read in a
    child so this process never loads torch."""
    p = subprocess.run([sys.executable, "-c",
                        "import torch; print(torch.__version__, torch.version.cuda)"],
                       capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode != 0:
        return None, None
    v, cuda = p.stdout.split()
    return v, cuda


def pytest_report_header(config):
    v, cuda = torch_versions()
    where = "a real GPU" if REAL else "the simulated GPU (scripts/simgpu)"
    if v is None:
        return "torch: not importable by " + sys.executable
    return (f"torch {v}, CUDA {cuda.split('.')[0]} (wheel built for CUDA {cuda}), "
            f"python {sys.executable}, on {where}")


_outcomes = []


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _outcomes.append(report.outcome)


def pytest_sessionfinish(session, exitstatus):
    """A suite in which every scenario skipped tested nothing: fail it."""
    if _outcomes and all(o == "skipped" for o in _outcomes):
        print("\ntests/torch: every scenario skipped - nothing was tested", file=sys.stderr)
        session.exitstatus = 1


class Run:
    def __init__(self, proc, out):
        self.proc = proc
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.files = sorted(out.glob("cumemtrace.*.json"))
        self.snapshots = [json.loads(f.read_text()) for f in self.files]
        lines = [l for l in self.stdout.splitlines() if l.startswith("TORCH ")]
        self.torch = json.loads(lines[-1][6:]) if lines else None

    def only(self, reason="exit"):
        snaps = [s for s in self.snapshots if s["reason"] == reason]
        assert len(snaps) == 1, (f"expected one {reason} snapshot, got "
                                 f"{[f.name for f in self.files]}\nstderr:\n{self.stderr}")
        return snaps[0]

    def device(self, reason="exit", ordinal=0):
        for d in self.only(reason)["devices"]:
            if d["ordinal"] == ordinal:
                return d
        raise AssertionError(f"no device {ordinal} in the {reason} snapshot")


def start_scenario(tmp, name, *args, traced, memory="24GiB", env=None):
    out = tmp / ("traced" if traced else "bare")
    out.mkdir(parents=True, exist_ok=True)
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_", "RANK"))}
    e.update(env or {})
    cmd = [] if REAL else [str(SIMGPU), "--build", str(BUILD), "--memory", memory, "--"]
    if traced:
        cmd += [str(CLI), "run", "--output", f"{out}/", "--"]
    cmd += [sys.executable, str(SCENARIOS / name), *args]
    p = subprocess.Popen(cmd, cwd=out, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    return p, out


def finish(started):
    p, out = started
    try:
        stdout, stderr = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        stdout, stderr = p.communicate()
        raise AssertionError(f"timed out after {TIMEOUT} s:\n{stderr}")
    return Run(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr), out)


# One run of each scenario a session: several tests judge the same run
# (scenario, arguments, memory, environment), and each run starts PyTorch,
# which is most of the suite's time.  The bare run is shared too by the
# runs that differ only in the tracer's own settings (CUMEMTRACE_*, which
# nothing reads without the tracer).  A test gets a fresh Run read from the
# shared directory, so none sees what another did to its objects.
_bare = {}
_traced = {}


def bare_env(env):
    return {k: v for k, v in (env or {}).items() if not k.startswith("CUMEMTRACE_")}


def run_pair(tmp, name, *args, expect_rc=0, memory="24GiB", env=None):
    """Runs a scenario traced, and bare unless a bare run of it is kept;
    checks that the tracer changed nothing PyTorch printed nor its exit
    status; returns the traced run's process and directory."""
    bkey = (name, args, memory, tuple(sorted(bare_env(env).items())))
    # Both at once: the suite's time is mostly starting torch.
    bare = None if bkey in _bare else start_scenario(tmp, name, *args, traced=False,
                                                     memory=memory, env=bare_env(env))
    started = start_scenario(tmp, name, *args, traced=True, memory=memory, env=env)
    if bare is not None:
        _bare[bkey] = (finish(bare), tmp / "bare")
    bare, there = _bare[bkey]
    if there != tmp / "bare":  # beside the traced run, where tests look for it
        (tmp / "bare").symlink_to(there)
    traced = finish(started)
    assert bare.torch is not None, f"no TORCH line:\n{bare.stdout}\n{bare.stderr}"
    assert bare.returncode == expect_rc, bare.stderr
    assert traced.returncode == bare.returncode, traced.stderr
    assert traced.stdout == bare.stdout, (bare.stdout, traced.stdout, traced.stderr)
    assert bare.files == [], "the bare run wrote snapshots"
    return traced.proc, started[1]


def _once(cache, key, name, args, make, tmp_path_factory):
    """make(tmp) once a session for `key`; its failure is kept too, and
    raised again for every test that asks for the same run."""
    if key not in cache:
        try:
            cache[key] = make(tmp_path_factory.mktemp(pathlib.Path(name).stem))
        except AssertionError as e:
            cache[key] = e
    got = cache[key]
    if isinstance(got, AssertionError):
        raise AssertionError(f"{name} {' '.join(args)}: {got}")
    return Run(*got)


@pytest.fixture
def scenario(tmp_path_factory):
    """Runs a scenario bare and traced (once a session for the same
    arguments: a later test gets the first run's outcome, its failure too)
    and returns the traced run."""
    def go(name, *args, expect_rc=0, memory="24GiB", env=None):
        key = (name, args, expect_rc, memory, tuple(sorted((env or {}).items())))
        return _once(_traced, key, name, args, lambda tmp: run_pair(
            tmp, name, *args, expect_rc=expect_rc, memory=memory, env=env), tmp_path_factory)
    return go


_solo = {}


@pytest.fixture
def traced_only(tmp_path_factory):
    """Runs a scenario under the tracer alone (no bare run: its output
    differs from run to run, or a test compares nothing with it), once a
    session for the same arguments, and returns a fresh Run of it: tests
    that judge the same run of a running job's dump share it."""
    def go(name, *args, memory="24GiB", env=None):
        key = (name, args, memory, tuple(sorted((env or {}).items())))
        return _once(_solo, key, name, args, lambda tmp: (
            finish(start_scenario(tmp, name, *args, traced=True, memory=memory,
                                  env=env)).proc, tmp / "traced"), tmp_path_factory)
    return go


def line_of(script, marker):
    """The 1-based line of `script` holding the comment `# <marker>`."""
    for i, text in enumerate((SCENARIOS / script).read_text().splitlines(), 1):
        if text.rstrip().endswith("# " + marker):
            return i
    raise AssertionError(f"no '# {marker}' in {script}")


def python_frames(snapshot, stack_id):
    for s in snapshot["stacks"]:
        if s["id"] == stack_id:
            return [f for f in s["frames"] if f.get("module") == "python" and "file" in f]
    raise AssertionError(f"no stack {stack_id}")


def markers(snapshot, stack_id):
    for s in snapshot["stacks"]:
        if s["id"] == stack_id:
            return [f["marker"] for f in s["frames"] if "marker" in f]
    raise AssertionError(f"no stack {stack_id}")


def pytest_configure(config):
    needs.configure(config)


def pytest_runtest_setup(item):
    needs.check(item)
