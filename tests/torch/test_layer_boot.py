"""How the PyTorch layer comes in: the preloaded library adds an audit hook
in C before the interpreter starts and loads the layer once torch.cuda is
imported (src/preload/life/torch_layer.c), so that PyTorch's history is on
before CUDA initialises and names the program's first tensor - under
`cumemtrace run`, under a plain LD_PRELOAD, in a Python that skips site
(where `run`'s sitecustomize never runs), and with torch imported in a
thread.  Before, a plain LD_PRELOAD and `python -S` loaded the layer at the
first allocation, after it: the first tensor had no line."""
import json
import os
import subprocess
import sys

import pytest

from conftest import BUILD, CLI, SCENARIOS, SIMGPU, line_of

SCRIPT = "boot_first_tensor.py"


_runs = {}


def run(tmp_path, flags=(), plain=False, args=()):
    """(device 0 of the exit snapshot, stderr) of the scenario traced: once
    a session for the same way in (the audit test reads the `run` way's)."""
    key = (flags, plain, args)
    if key not in _runs:
        _runs[key] = run_once(tmp_path, flags, plain, args)
    return _runs[key]


def run_once(tmp_path, flags, plain, args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_", "PYTHONPATH"))}
    cmd = [str(SIMGPU), "--build", str(BUILD), "--memory", "4GiB", "--"]
    if plain:
        env["LD_PRELOAD"] = str(BUILD / "libcumemtrace.so")
        env["CUMEMTRACE_OUTPUT"] = f"{tmp_path}/"
    else:
        cmd += [str(CLI), "run", "--output", f"{tmp_path}/", "--"]
    python = [sys.executable, *flags]
    if "-S" in flags:  # without site the venv's packages are not on sys.path
        env["PYTHONPATH"] = next(p for p in sys.path if p.endswith("site-packages"))
    r = subprocess.run(cmd + python + [str(SCENARIOS / SCRIPT), *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    [snap] = [json.loads(f.read_text()) for f in tmp_path.glob("cumemtrace.*.json")]
    [dev] = [d for d in snap["devices"] if d["ordinal"] == 0]
    return dev, r.stderr


def lines(dev):
    assert dev["tensors"] is not None, dev
    return {(g["site"]["file"].rsplit("/", 1)[-1], g["site"]["line"]): g["bytes"]
            for g in dev["tensors"]["groups"] if g["site"] is not None}


@pytest.mark.parametrize("how", ["run", "plain", "run-S", "plain-thread"])
def test_the_first_tensor_is_named(tmp_path, how):
    # plain-thread: torch imported and used in a thread while the main
    # thread waits in join(), where no pending call of CPython's runs
    dev, err = run(tmp_path, flags=("-S",) if how == "run-S" else (),
                   plain=how.startswith("plain"), args=("thread",) if "thread" in how else ())
    assert lines(dev).get((SCRIPT, line_of(SCRIPT, "FIRST"))) == 4 << 20, (lines(dev), err)
    assert "warning" not in err, err


def test_a_hosts_audit_hook_sees_what_it_sees_bare(tmp_path):
    # ours is in C and raises no event of its own: in a loop of id() the
    # program's hook counts what it counts bare, one an id()
    # (the traced run is test_the_first_tensor_is_named[run]'s)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_", "PYTHONPATH"))}
    cmd = [str(SIMGPU), "--build", str(BUILD), "--memory", "4GiB", "--"]
    bare = subprocess.run(cmd + [sys.executable, str(SCENARIOS / SCRIPT)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0, bare.stderr
    counts = []
    for err in (bare.stderr, run(tmp_path)[1]):
        [n] = [int(l.split()[1]) for l in err.splitlines() if l.startswith("EVENTS ")]
        counts.append(n)
    assert counts[1] == counts[0] == 1000, counts
