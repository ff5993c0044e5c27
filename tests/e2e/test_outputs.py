"""Where snapshot files go, and that no output path can hang the host or
lose a snapshot.  Scenarios: tests/progs/rt_outputs.c."""
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import CLI, PROGS, base_env, device, run_env

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
    for allocs in (300000, 1000000, 1000000, 1000000):
        p = in_pid_namespace([PROG, "many", allocs], tmp_path, env)
        # pid 1 of the namespace, found before the dump starts, so that the
        # kill follows the temporary's appearance at once (the exit dump of
        # 300,000 pairs lasts tens of milliseconds)
        deadline = time.monotonic() + 60
        child = None
        while child is None and p.poll() is None and time.monotonic() < deadline:
            kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
            child = int(kids[0]) if kids else None
        while child is not None and not temps(out) and p.poll() is None and \
                time.monotonic() < deadline:
            time.sleep(0.0005)
        if child is not None and temps(out) and p.poll() is None:
            os.kill(child, signal.SIGKILL)
            p.communicate(timeout=60)
            if temps(out):
                break
        p.communicate(timeout=60)
        for f in out.iterdir():
            f.unlink()  # finished before we could kill it: a bigger dump
    else:
        pytest.fail("the exit dump always finished before it could be killed")
    left = temps(out)
    assert len(left) == 1 and left[0].startswith(".cumemtrace-tmp.1."), left
    # no snapshot; the stream, if the background thread ran before the exit
    # (it flushes at once, but a quick host can reach its exit dump first), is
    # the killed process's record (docs/stream-format.md; tests in test_stream)
    assert {f.name for f in out.glob("cumemtrace.*")} <= {"cumemtrace.rt_outputs.1.stream"}
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
    assert lines[0] == "cumemtrace-manifest k1"
    # "cuda <pid> <exe>", "stream <pid> - <path>", "wrote <pid> exit <path>"
    wrote = [l.split(" ", 3) for l in lines[1:] if l.startswith("wrote ")]
    assert len(wrote) == 1 and wrote[0][2] == "exit", lines
    assert any(l.startswith("cuda ") and l.endswith(" rt_outputs") for l in lines), lines
    assert wrote[0][3].startswith(str(tmp_path) + "/cumemtrace.rt_outputs.")
    assert notes(r.stderr) == [f"cumemtrace: wrote {os.path.basename(wrote[0][3])} "
                               f"(peak 4.00 KiB on GPU 0)"]


# ---- item 4: an unusable output place is noticed at the first CUDA call ----

def test_a_missing_output_directory_falls_back_before_the_oom_post_mortem(tmp_path):
    r = traced([PROGS / "rt_workload", "oom"], tmp_path,
               {"CUMEMTRACE_OUTPUT": "/nonexistent/dir/x.json"})
    assert r.returncode == 0, r.stderr
    first = notes(r.stderr)[0]
    assert first == (f"cumemtrace: warning: cannot write snapshots to /nonexistent/dir/: "
                     f"No such file or directory; writing them to {tmp_path}/ instead "
                     f"(set CUMEMTRACE_OUTPUT to a writable directory)"), r.stderr
    assert (tmp_path / "x.json").exists()
    assert list(tmp_path.glob("x.oom.*.json")), r.stderr  # the post-mortem survives
    assert sum("/nonexistent" in l for l in notes(r.stderr)) == 1


def test_fallback_order_current_directory_then_tmpdir(tmp_path):
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    gone = tmp_path / "gone"
    gone.mkdir()
    # the default pattern writes to the current directory, which was removed
    r = traced(["sh", "-c", f'cd {gone} && rmdir {gone} && exec "$0" many 10', PROG],
               tmp_path, {"TMPDIR": str(tmpdir)})
    assert r.returncode == 0, r.stderr
    assert notes(r.stderr)[0] == (
        f"cumemtrace: warning: cannot write snapshots to ./: No such file or directory; "
        f"writing them to {tmpdir}/ instead (set CUMEMTRACE_OUTPUT to a writable directory)")
    assert len(list(tmpdir.glob("cumemtrace.rt_outputs.*.json"))) == 1
    # a file where a directory should be: the current directory takes it
    r = traced([PROG, "many", "10"], tmp_path, {"CUMEMTRACE_OUTPUT": "/etc/passwd/%p.json"})
    assert notes(r.stderr)[0] == (
        f"cumemtrace: warning: cannot write snapshots to /etc/passwd/: Not a directory; "
        f"writing them to {tmp_path}/ instead (set CUMEMTRACE_OUTPUT to a writable directory)")
    assert len(list(tmp_path.glob("[0-9]*.json"))) == 1


def test_a_fifo_as_output_file_is_refused_with_one_warning(tmp_path):
    fifo = tmp_path / "snap.json"
    os.mkfifo(fifo)
    r = traced([PROG, "many", "10"], tmp_path, {"CUMEMTRACE_OUTPUT": str(fifo)})
    assert r.returncode == 0, r.stderr
    assert notes(r.stderr)[0] == (
        f"cumemtrace: warning: CUMEMTRACE_OUTPUT names '{fifo}', which is not a regular "
        f"file; snapshots go to {tmp_path}/ under their default names instead (set "
        f"CUMEMTRACE_OUTPUT to a directory or a file name)")
    assert len(list(tmp_path.glob("cumemtrace.rt_outputs.*.json"))) == 1


def test_dev_null_as_output_sends_snapshots_to_the_current_directory(tmp_path):
    """CUMEMTRACE_OUTPUT=/dev/null wrote into /dev/."""
    before = set(os.listdir("/dev"))
    r = traced([PROG, "many", "10"], tmp_path, {"CUMEMTRACE_OUTPUT": "/dev/null"})
    assert r.returncode == 0, r.stderr
    assert [n for n in set(os.listdir("/dev")) - before if "cumemtrace" in n] == []
    assert f"snapshots go to {tmp_path}/ under their default names" in r.stderr, r.stderr
    assert len(list(tmp_path.glob("cumemtrace.rt_outputs.*.json"))) == 1


def test_a_host_name_cannot_lead_the_file_out_of_its_directory(tmp_path):
    """%h expanded a host named ../../escaped verbatim."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-u", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -u (a UTS namespace of our own) is not available")
    d = tmp_path / "a" / "b"
    d.mkdir(parents=True)
    r = subprocess.run(["unshare", "-u", "sh", "-c", 'printf %s ../../escaped > /proc/sys/kernel/hostname && exec "$@"',
                        "sh", str(PROG), "many", "10"], cwd=d,
                       env=base_env({"CUMEMTRACE_OUTPUT": "%h.%p.json"}),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.glob("escaped*")) == [], list(tmp_path.iterdir())
    [f] = list(d.glob("*.json"))
    assert f.name.startswith(".._.._escaped."), f.name
    assert json.loads(f.read_text())["process"]["host"] == "../../escaped"


# ---- item 20: warnings that say the right thing, once, where CUDA is used ----

def test_config_warnings_come_only_from_processes_that_touch_cuda(tmp_path):
    bad = {"CUMEMTRACE_DEPTH": "deep", "CUMEMTRACE_SIGNAL": "HUP"}
    r = traced([PROGS / "plain"], tmp_path, bad)
    assert r.returncode == 0 and r.stderr == ""
    # sh (no CUDA) runs the traced program: each warning once, not per process
    r = traced(["sh", "-c", '"$0" many 10; true', PROG], tmp_path, bad)
    assert r.returncode == 0
    assert r.stderr.count("ignoring CUMEMTRACE_DEPTH='deep'") == 1, r.stderr
    assert r.stderr.count("ignoring CUMEMTRACE_SIGNAL='HUP'") == 1, r.stderr


def test_long_values_are_abbreviated_so_the_advice_survives(tmp_path):
    pattern = "%e" * 1500  # 3000 bytes that expand to 15000
    r = traced([PROG, "many", "10"], tmp_path, {"CUMEMTRACE_OUTPUT": pattern})
    [line] = notes(r.stderr)
    assert line.endswith("set a shorter one"), line
    assert "(3000 bytes)" in line and len(line) < 300
    r = traced([PROG, "many", "10"], tmp_path, {"CUMEMTRACE_LIMIT": "x" * 2000})
    [line] = [l for l in notes(r.stderr) if "LIMIT" in l]
    assert line.endswith("running without a limit") and "(2000 bytes)" in line


def test_an_explicit_dump_path_gets_advice_about_that_path(tmp_path):
    r = traced([PROG, "dump", "/nonexistent/mid.json"], tmp_path, {})
    assert r.stdout == "dump returned -1\n"
    [line] = [l for l in notes(r.stderr) if "mid.json" in l]
    assert line == ("cumemtrace: warning: cannot write snapshot '/nonexistent/mid.json': "
                    "No such file or directory (pass cumemtrace_dump() a path in a "
                    "writable directory)")


# ---- item 5: `run --output FILE` never leaves a stale FILE to be read ----

def cli_run(tmp_path, *args):
    return subprocess.run([str(CLI), "run", *map(str, args)], cwd=tmp_path, env=run_env(),
                          capture_output=True, text=True, timeout=60)


def test_run_refuses_to_leave_a_stale_output_file_behind(tmp_path):
    out = tmp_path / "run.json"
    r = cli_run(tmp_path, "--output", "run.json", "--", PROG, "many", "10")
    assert r.returncode == 0, r.stderr
    first = json.loads(out.read_text())["process"]["pid"]
    assert r.stderr.splitlines()[-2:] == ["cumemtrace: 1 snapshot written:",
                                          f"  {out}  (exit, pid {first})"]
    # the same command again: an error before anything runs, the file untouched
    r = cli_run(tmp_path, "--output", "run.json", "--", PROG, "many", "10")
    assert r.returncode == 2
    assert r.stderr == ("cumemtrace: run: 'run.json' already exists (an earlier run's "
                        "snapshot?); remove it, choose another --output, or add --force "
                        "to replace it\n")
    assert json.loads(out.read_text())["process"]["pid"] == first
    assert not (tmp_path / "run.json.1").exists()
    # --force replaces it, and run names exactly the file written
    r = cli_run(tmp_path, "--output", "run.json", "--force", "--", PROG, "many", "10")
    assert r.returncode == 0, r.stderr
    second = json.loads(out.read_text())["process"]["pid"]
    assert r.stderr.splitlines()[-2:] == ["cumemtrace: 1 snapshot written:",
                                          f"  {out}  (exit, pid {second})"]
    assert second != first
    assert not (tmp_path / "run.json.1").exists()
    # patterns and directories are not single files: no check
    (tmp_path / "d").mkdir()
    assert cli_run(tmp_path, "--output", "d", "--", PROG, "many", "1").returncode == 0
    assert cli_run(tmp_path, "--output", "d", "--", PROG, "many", "1").returncode == 0
    assert len(list((tmp_path / "d").iterdir())) == 2
    r = cli_run(tmp_path, "--force", "--", PROG, "many", "1")
    assert r.returncode == 2 and "--force" in r.stderr


# ---- item 20: the image a process execs away keeps its snapshot ----

def exec_snaps(d):
    return [json.loads(f.read_text()) for f in sorted(d.glob("cumemtrace.*.exec.*.json"))]


@pytest.mark.parametrize("how", ["exec", "execvp", "execl"])
def test_the_pre_exec_image_writes_its_snapshot(tmp_path, how):
    target = "true" if how == "execvp" else "/bin/true"
    r = traced([PROG, how, target], tmp_path, {})
    assert r.returncode == 0, r.stderr
    [snap] = exec_snaps(tmp_path)
    assert snap["reason"] == "exec"
    assert device(snap)["current_bytes"] == 3 << 20
    assert len(list(tmp_path.glob("cumemtrace.*.json"))) == 1  # true writes nothing
    # not said: at that moment the exec may still fail and remove it
    assert ".exec." not in r.stderr, r.stderr


def test_a_failed_exec_leaves_only_the_exit_snapshot(tmp_path):
    r = traced([PROG, "exec-fail"], tmp_path, {})
    assert r.stdout == "execv returned -1 errno No such file or directory\n"
    assert exec_snaps(tmp_path) == []
    [f] = tmp_path.glob("cumemtrace.*.json")
    snap = json.loads(f.read_text())
    assert snap["reason"] == "exit" and device(snap)["current_bytes"] == 8 << 20
    # an exec that fails after the snapshot was written (the file is not a
    # program): the snapshot is removed, run lists only what exists
    bad = tmp_path / "notaprogram"
    bad.write_text("\x7fELF garbage")
    bad.chmod(0o755)
    out = tmp_path / "o"
    out.mkdir()
    r = cli_run(tmp_path, "--output", out, "--", PROG, "exec", bad)
    assert r.returncode == 127
    files = list(out.iterdir())
    assert [json.loads(f.read_text())["reason"] for f in files] == ["exit"]
    pid = json.loads(files[0].read_text())["process"]["pid"]
    assert r.stderr.splitlines()[-2:] == ["cumemtrace: 1 snapshot written:",
                                          f"  {files[0]}  (exit, pid {pid})"]


def test_a_vfork_child_that_execs_writes_nothing(tmp_path):
    r = traced([PROG, "vfork"], tmp_path, {})
    assert r.returncode == 0 and r.stdout == "child status 0\n", r.stderr
    [f] = tmp_path.glob("cumemtrace.*.json")
    snap = json.loads(f.read_text())
    assert snap["reason"] == "exit" and device(snap)["current_bytes"] == 0


def test_each_image_of_an_exec_chain_numbers_its_snapshot(tmp_path):
    """Every image of the same pid wrote `.exec.0.json`,
    so the names became .exec.0.json.1, .2 ... and `report DIR`, which
    reads *.json, saw 1 of 3."""
    chain = [str(PROG), "exec"] * 3 + ["/bin/true"]
    r = traced(chain, tmp_path, {})
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("cumemtrace."))
    pid = int(names[0].split(".")[2])
    assert names == [f"cumemtrace.rt_outputs.{pid}.exec.{i}.json" for i in range(3)], names
    assert [s["reason"] for s in exec_snaps(tmp_path)] == ["exec"] * 3
    rep = subprocess.run([str(CLI), "report", str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.startswith(f"cumemtrace report: pid {pid} "), rep.stdout
    assert ", 3 files" in rep.stdout.splitlines()[0], rep.stdout
    for i in range(3):  # each image its own row
        assert re.search(rf"^  exec .* \.exec\.{i}\.json$", rep.stdout, re.M), rep.stdout


def test_a_failed_exec_says_nothing_of_a_file_it_removed(tmp_path):
    """An exec that fails after its snapshot was written (the file is no
    program; Python's os.execvp tries each PATH entry so) removes the file:
    the host's stderr must not say it was written, once per try."""
    bad = tmp_path / "notaprogram"
    bad.write_text("\x7fELF garbage")
    bad.chmod(0o755)
    r = traced([PROG, "exec", bad], tmp_path, {})
    assert r.returncode == 127, r.stderr
    assert exec_snaps(tmp_path) == []
    assert not [l for l in notes(r.stderr) if "exec" in l], r.stderr
    [f] = tmp_path.glob("cumemtrace.*.json")
    assert f"cumemtrace: wrote {f.name} (" in r.stderr  # the exit one is said


def test_the_last_line_names_the_peak_of_the_file_finally_written(tmp_path):
    """A Python host's exit snapshot is written at the interpreter's end and
    rewritten by the C exit when something was allocated after it (here a C
    atexit handler's 512 MiB): the line on stderr must give the peak of the
    file as it was finally written, not of the first version."""
    script = (
        "import ctypes\n"
        "rt = ctypes.CDLL('libcudart.so.13')\n"
        "p = ctypes.c_void_p()\n"
        "assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(20 << 20)) == 0\n"
        f"late = ctypes.CDLL({str(PROGS / 'liblatealloc.so')!r})\n"
        "assert late.late_alloc_at_exit(ctypes.c_size_t(512 << 20)) == 0\n")
    r = traced([sys.executable, "-c", script], tmp_path, {}, timeout=60)
    assert r.returncode == 0, r.stderr
    [f] = tmp_path.glob("cumemtrace.*.json")
    snap = json.loads(f.read_text())
    assert device(snap)["peak_bytes"] == 532 << 20
    said = [l for l in notes(r.stderr) if f.name in l]
    assert said and re.search(r"\(peak 532(\.0)? MiB on GPU 0\)$", said[-1]), r.stderr
