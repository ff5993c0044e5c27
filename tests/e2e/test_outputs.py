"""Where snapshot files go, and that no output path can hang the host or
lose a snapshot (issue 10, items 2-5 and 20).  Scenarios: tests/progs/rt_outputs.c."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import PROGS, MiB, base_env, device

PROG = PROGS / "rt_outputs"


def _unshare_works():
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    r = subprocess.run(["unshare", "-pf", "--mount-proc", "true"],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"unshare -pf --mount-proc fails: {r.stderr.strip()}"


def in_pid_namespace(args, cwd, env, **kw):
    """Starts args as pid 1 of a new pid namespace (what a container does)."""
    return subprocess.Popen(["unshare", "-pf", "--mount-proc", *map(str, args)],
                            cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def temps(d):
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".cumemtrace-tmp"))


def test_a_dump_killed_half_way_does_not_block_the_next_process_with_its_pid(tmp_path):
    why = _unshare_works()
    if why:
        pytest.skip(why)
    out = tmp_path / "out"
    out.mkdir()
    env = base_env({"CUMEMTRACE_OUTPUT": str(out), "CUMEMTRACE_EVENTS": "1000000",
                    })
    # 1: a large exit dump, killed (-9) as soon as its temporary appears
    for allocs in (300000, 1000000):
        p = in_pid_namespace([PROG, "many", allocs], tmp_path, env)
        deadline = time.monotonic() + 60
        while not temps(out) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        child = int(open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()[0]) \
            if p.poll() is None else None
        if child is not None and temps(out):
            os.kill(child, signal.SIGKILL)  # pid 1 of the namespace
            p.communicate(timeout=60)
            break
        p.communicate(timeout=60)
        for f in out.iterdir():
            f.unlink()  # finished before we could kill it: a bigger dump
    else:
        pytest.fail("the exit dump always finished before it could be killed")
    left = temps(out)
    assert len(left) == 1 and left[0].startswith(".cumemtrace-tmp.1."), left
    assert not list(out.glob("cumemtrace.*"))
    # 2: the next traced program gets the same pid (1) and the same directory
    p = in_pid_namespace([PROG, "many", "10"], tmp_path, env)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    snap = json.loads((out / "cumemtrace.rt_outputs.1.json").read_text())
    assert snap["process"]["pid"] == 1
    assert device(snap)["by_kind"]["device"]["allocs"] == 10
    assert "warning" not in err, err
    assert temps(out) == []  # the dead writer's temporary was removed


def test_temporaries_that_are_not_provably_ours_are_left_alone(run, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    foreign = out / ".cumemtrace-tmp.1.0123456789abcdef"   # another user's
    foreign.write_text("theirs")
    os.chown(foreign, 65534, 65534)
    live = out / ".cumemtrace-tmp.2.00000000deadbeef"     # a writer still at work
    live.write_text("busy")
    target = tmp_path / "precious"
    target.write_text("precious")
    link = out / ".cumemtrace-tmp.3.00000000cafef00d"     # a symlink
    link.symlink_to(target)
    old_style = out / ".cumemtrace-tmp.4.0"               # an older version's name
    old_style.write_text("old")
    stale = out / ".cumemtrace-tmp.5.0000000012345678"    # ours, writer dead
    stale.write_text("{")
    with open(live) as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        r = run([PROG, "many", "10"], env={"CUMEMTRACE_OUTPUT": str(out)})
    assert len(list(out.glob("cumemtrace.rt_outputs.*.json"))) == 1, r.stderr
    assert foreign.read_text() == "theirs" and live.read_text() == "busy"
    assert link.is_symlink() and target.read_text() == "precious"
    assert old_style.exists()
    assert not stale.exists()


# ---- item 2: no output path can block the host; the manifest is run's own ----

def traced(args, cwd, env, timeout=15):
    """Runs a traced program; a hang fails the test instead of blocking it."""
    return subprocess.run([str(a) for a in args], cwd=cwd, env=base_env(env),
                          capture_output=True, text=True, timeout=timeout)


def notes(stderr):
    return [l for l in stderr.splitlines() if l.startswith("cumemtrace:")]


def test_a_fifo_as_manifest_never_blocks_the_host(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = traced([PROG, "many", "10"], tmp_path,
               {"CUMEMTRACE_MANIFEST": str(fifo), "CUMEMTRACE_MANIFEST_KEY": "k"})
    assert r.returncode == 0, r.stderr
    assert len(list(tmp_path.glob("cumemtrace.rt_outputs.*.json"))) == 1
    [warn] = [l for l in notes(r.stderr) if "MANIFEST" in l]
    assert f"CUMEMTRACE_MANIFEST='{fifo}': not a regular file" in warn, warn
    assert "unset CUMEMTRACE_MANIFEST" in warn


def test_the_manifest_is_appended_only_when_run_created_it(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes\n")
    r = traced([PROG, "many", "10"], tmp_path,
               {"CUMEMTRACE_MANIFEST": str(mine), "CUMEMTRACE_MANIFEST_KEY": "k1"})
    assert r.returncode == 0 and mine.read_text() == "my notes\n"
    assert any("its first line is not the one `cumemtrace run` wrote" in l
               for l in notes(r.stderr)), r.stderr
    # the header with another run's key: not ours either
    mine.write_text("cumemtrace-manifest k2\n")
    r = traced([PROG, "many", "10"], tmp_path,
               {"CUMEMTRACE_MANIFEST": str(mine), "CUMEMTRACE_MANIFEST_KEY": "k1"})
    assert mine.read_text() == "cumemtrace-manifest k2\n"
    # without a key (set by hand): refused
    r = traced([PROG, "many", "10"], tmp_path, {"CUMEMTRACE_MANIFEST": str(mine)})
    assert "CUMEMTRACE_MANIFEST_KEY is not set" in r.stderr
    # the list run made: one line per snapshot
    mine.write_text("cumemtrace-manifest k1\n")
    r = traced([PROG, "many", "10"], tmp_path,
               {"CUMEMTRACE_MANIFEST": str(mine), "CUMEMTRACE_MANIFEST_KEY": "k1"})
    lines = mine.read_text().splitlines()
    assert lines[0] == "cumemtrace-manifest k1" and len(lines) == 2
    assert lines[1].startswith(str(tmp_path) + "/cumemtrace.rt_outputs.")
    assert notes(r.stderr) == [f"cumemtrace: wrote {os.path.basename(lines[1])} "
                               f"(peak 4.00 KiB on GPU 0)"]
