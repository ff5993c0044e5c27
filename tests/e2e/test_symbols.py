"""Native frames named from debug information (issue 15): static and inlined
functions with file:line from DWARF, a stripped binary falling back to what
the snapshot recorded, a rebuild whose code moved still matched by diff, and
a binary replaced after the run detected by its build-id."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import BUILD, CLI, ROOT, SIM, base_env

SRC = ROOT / "tests" / "progs" / "rt_symbols.c"


def marker_lines():
    """{marker: line} for the LINE:name comments of the program."""
    out = {}
    for n, text in enumerate(SRC.read_text().splitlines(), 1):
        if "/* LINE:" in text:
            out[text.split("/* LINE:")[1].split()[0]] = n
    return out


def build(path, *defines):
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-rdynamic",
                    *[f"-D{d}" for d in defines],
                    f"-I{ROOT / 'src' / 'common'}", f"-I{ROOT / 'include'}",
                    "-o", str(path), str(SRC), f"-L{SIM}", "-lcudart",
                    f"-Wl,-rpath,{SIM}"], check=True)
    return path


def trace(exe, cwd):
    cwd.mkdir(exist_ok=True)
    subprocess.run([str(exe)], cwd=cwd, env=base_env(), check=True,
                   capture_output=True, timeout=60)
    (snap,) = cwd.glob("cumemtrace.*.json")
    return snap


def cli(*args, env=None):
    e = dict(os.environ, NO_COLOR="1")
    e.pop("CUMEMTRACE_DEBUGINFO", None)
    e.update(env or {})
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True,
                          text=True, env=e, timeout=60)


def folded(snap, **kw):
    r = cli("flamegraph", snap, **kw)
    assert r.returncode == 0, r.stderr
    return [l.rpartition(" ")[0].split(";") for l in r.stdout.splitlines()]


@pytest.fixture
def prog(tmp_path):
    return build(tmp_path / "symprog")


def test_static_and_inlined_functions_have_file_and_line(prog, tmp_path):
    snap = trace(prog, tmp_path / "run")
    doc = json.loads(snap.read_text())
    mod = next(m for m in doc["modules"] if m["name"] == "symprog")
    assert mod["path"] == str(prog)
    readelf = subprocess.run(["readelf", "-n", str(prog)], capture_output=True,
                             text=True).stdout
    assert mod["build_id"] in readelf, "the build-id recorded is the file's own"
    L = marker_lines()
    stacks = folded(snap)
    hidden = next(s for s in stacks if any("hidden_alloc" in f for f in s))
    assert hidden[-2] == f"symprog!hidden_alloc at rt_symbols.c:{L['hidden_alloc']}"
    inl = next(s for s in stacks if any("inlined_alloc" in f for f in s))
    # innermost first in the snapshot; the folded line reads outermost first
    assert inl[-2] == f"symprog!inlined_alloc at rt_symbols.c:{L['inlined_alloc']} (inlined)"
    assert inl[-3] == f"symprog!outer_of_inlined at rt_symbols.c:{L['outer_call']}"
    # two calls from main on different lines are two frames
    assert hidden[-3] != inl[-4] and hidden[-3].startswith("symprog!main at rt_symbols.c:")


def test_debuginfo_off_keeps_the_recorded_names(prog, tmp_path):
    snap = trace(prog, tmp_path / "run")
    stacks = folded(snap, env={"CUMEMTRACE_DEBUGINFO": "off"})
    flat = [f for s in stacks for f in s]
    assert not any(" at rt_symbols.c" in f for f in flat)
    assert "symprog!main" in flat and any(f.startswith("symprog+0x") for f in flat)


def test_stripped_binary_falls_back_cleanly(prog, tmp_path):
    stripped = tmp_path / "stripped"
    shutil.copy(prog, stripped)
    subprocess.run(["strip", "--strip-all", str(stripped)], check=True)
    snap = trace(stripped, tmp_path / "run")
    r = cli("report", snap)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    flat = [f for s in folded(snap) for f in s]
    assert not any(" at rt_symbols.c" in f for f in flat)
    # the exported main keeps its dynamic symbol, the static helper its offset
    assert "stripped!main" in flat
    assert any(f.startswith("stripped+0x") for f in flat)


def test_rebuild_with_moved_code_still_matches_in_diff(tmp_path):
    a = trace(build(tmp_path / "symprog"), tmp_path / "a")
    (tmp_path / "b").mkdir()
    b = trace(build(tmp_path / "b" / "symprog", "PAD"), tmp_path / "b")
    off = lambda snap: sorted(f["offset"] for s in json.loads(snap.read_text())["stacks"]
                              for f in s["frames"] if f["module"] == "symprog")
    assert off(a) != off(b), "-DPAD must move the code"
    r = cli("diff", a, b)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Call sites at peak")[1].split("\n\n")[0]
    assert "(2 call sites unchanged)" in section, r.stdout
    # without debug information the moved static helper no longer matches
    r = cli("diff", a, b, env={"CUMEMTRACE_DEBUGINFO": "off"})
    section = r.stdout.split("Call sites at peak")[1].split("\n\n")[0]
    assert "(2 call sites unchanged)" not in section, r.stdout


def test_binary_replaced_after_the_run_is_detected(tmp_path):
    exe = build(tmp_path / "symprog")
    snap = trace(exe, tmp_path / "run")
    build(tmp_path / "symprog", "PAD")  # same path, another build
    r = cli("report", snap)
    assert r.returncode == 0
    assert "is not the one that ran" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert " at rt_symbols.c" not in r.stdout
    assert "symprog!main" in r.stdout or "symprog+0x" in r.stdout
