"""`make install` lays out a prefix that works on its own (the pip package
is such a prefix inside site-packages, docs/install.md): the installed
`cumemtrace run` preloads the installed library and puts the installed
PyTorch bootstrap on PYTHONPATH, the installed `simgpu` runs a program on
the installed simulated device (PREFIX/lib/cumemtrace/simgpu/sim, not the
build tree's), and `make uninstall` removes every file it installed."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, CLI, PROGS, ROOT, run_env

pytestmark = pytest.mark.skipif(not CLI.exists(), reason=f"{CLI} not built (make)")
PREFIX = "/opt/cumemtrace"


def make(target, dest):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # not the outer make's jobserver
    p = subprocess.run(["make", "-s", "-C", str(ROOT), f"BUILD={BUILD}", f"DESTDIR={dest}",
                        f"PREFIX={PREFIX}", target], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return dest / PREFIX.lstrip("/")


def installed_env():
    env = run_env()
    env.pop("LD_LIBRARY_PATH", None)  # the build tree's device: only simgpu's may be used
    return env


def test_installed_prefix_runs_on_its_own(tmp_path):
    root = make("install", tmp_path / "dest")
    simgpu = root / "lib" / "cumemtrace" / "simgpu"
    for f in ("bin/cumemtrace", "lib/libcumemtrace.so", "include/cumemtrace.h",
              "share/cumemtrace/torchboot/sitecustomize.py",
              "share/cumemtrace/torchboot/cumemtrace_torch.py",
              "share/cumemtrace/torchboot/layer/facts.py", "lib/cumemtrace/simgpu/simgpu",
              "lib/cumemtrace/simgpu/sim/libcuda.so.1", "lib/cumemtrace/simgpu/sim/libcudart.so.13",
              "lib/cumemtrace/simgpu/sim/libnvidia-ml.so.1"):
        assert (root / f).is_file(), f

    sim = [str(simgpu / "simgpu"), "--"]
    run = [str(root / "bin" / "cumemtrace"), "run"]
    p = subprocess.run(sim + run + ["--", "sh", "-c", 'echo "$LD_PRELOAD|$PYTHONPATH"'],
                       capture_output=True, text=True, env=installed_env(), timeout=60)
    assert p.returncode == 0, p.stderr
    preload, pythonpath = p.stdout.strip().split("|")
    entries = preload.replace(" ", ":").split(":")
    assert str(root / "lib" / "libcumemtrace.so") in entries, preload
    assert str(simgpu / "sim" / "libcudart.so.13") in entries, preload
    assert pythonpath.split(":")[0] == str(root / "share" / "cumemtrace" / "torchboot")

    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run(sim + run + ["--output", f"{out}/", "--", str(PROGS / "rt_workload"),
                                    "basic"],
                       capture_output=True, text=True, env=installed_env(), timeout=60)
    assert p.returncode == 0, p.stderr
    files = sorted(out.glob("cumemtrace.*.json"))
    assert len(files) == 1, (files, p.stderr)
    snap = json.loads(files[0].read_text())
    assert snap["devices"] and snap["devices"][0]["peak_bytes"] > 0


def test_uninstall_removes_what_install_put(tmp_path):
    dest = tmp_path / "dest"
    make("install", dest)
    assert any(p.is_file() for p in dest.rglob("*"))
    make("uninstall", dest)
    left = [str(p) for p in dest.rglob("*") if not p.is_dir()]
    assert left == [], left
