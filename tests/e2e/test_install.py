"""`make install` lays out a prefix that works on its own (the pip package
is such a prefix inside site-packages, docs/install.md): the installed
`cumemtrace run` preloads the installed library and puts the installed
PyTorch bootstrap on PYTHONPATH, the installed `simgpu` runs a program on
the installed simulated device (PREFIX/lib/cumemtrace/simgpu/sim, not the
build tree's), and `make uninstall` removes every file it installed."""
import json
import os
import re
import subprocess
from pathlib import Path

from conftest import BUILD, CLI, LIB, PROGS, ROOT, run_env
from needs import needs

pytestmark = needs(CLI.exists(), f"{CLI}", "make builds it")
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


# What a user's C program calls; the rest of the library's cumemtrace_*
# symbols are the PyTorch layer's (src/preload/life/torch_protocol.h).
USER_API = {"cumemtrace_dump", "cumemtrace_mark_begin", "cumemtrace_mark_end",
            "cumemtrace_usage", "cumemtrace_phase_push", "cumemtrace_phase_pop",
            "cumemtrace_version"}
DECLARED = re.compile(r"^[a-z][\w \*]*?\b(cumemtrace_\w+)\s*\(", re.M)


def declared(path):
    return set(DECLARED.findall(path.read_text()))


def test_the_installed_header_is_the_users_api_only(tmp_path):
    root = make("install", tmp_path / "dest")
    headers = sorted(p.relative_to(root) for p in root.rglob("*.h"))
    assert headers == [Path("include/cumemtrace.h")], headers
    assert declared(root / "include" / "cumemtrace.h") == USER_API
    # It stands alone: a C program that uses all of it compiles against it.
    prog = tmp_path / "user.c"
    prog.write_text('#include "cumemtrace.h"\n#include <stddef.h>\n'
                    "int main(void) {\n"
                    "    struct cumemtrace_usage u;\n"
                    "    int m = cumemtrace_mark_begin();\n"
                    "    cumemtrace_phase_push(NULL, \"x\"); cumemtrace_phase_pop(NULL);\n"
                    "    return cumemtrace_usage(0, &u) + cumemtrace_mark_end(m) +\n"
                    "           cumemtrace_dump(NULL) + (cumemtrace_version() == NULL);\n"
                    "}\n")
    p = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                        f"-I{root / 'include'}", str(prog)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_every_exported_entry_point_is_declared_once():
    """The layer's entry points stay exported (it calls them through
    ctypes) and declared, privately."""
    public = declared(ROOT / "include" / "cumemtrace.h")
    private = declared(ROOT / "src" / "preload" / "life" / "torch_protocol.h")
    nm = subprocess.run(["nm", "-D", "--defined-only", str(LIB)], capture_output=True,
                        text=True, check=True).stdout
    exported = {line.split()[-1] for line in nm.splitlines()
                if line.split()[-1].startswith("cumemtrace_")}
    assert public & private == set()
    assert public | private == exported, (exported - public - private,
                                          (public | private) - exported)
    assert public == USER_API
