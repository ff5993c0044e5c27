"""Every way a process ends leaves a record: termination signals
with and without host handlers, with the exit status an untraced run has,
and `cumemtrace run` saying per process what it wrote and why."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, CLI, PROGS, ROOT, SAN_RUNTIME, base_env, device, run_env

PYTHON = "/usr/bin/python3"
HOLD_PY = ROOT / "tests" / "python" / "hold.py"
MiB = 1 << 20


STOP_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)


def default_dispositions():
    # An ignored signal is inherited: under `nohup make test &` SIGHUP and
    # SIGINT would be ignored by the host, traced or not, and it would never
    # stop.  These tests are about hosts that start with the defaults.
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)


def start(cmd, cwd, env=None, preload=True):
    # an instrumented build's programs need the sanitizer runtime even bare
    first = [SAN_RUNTIME] if SAN_RUNTIME and not preload else []
    p = subprocess.Popen([str(c) for c in cmd], cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=default_dispositions,
                         env=base_env(env, preload=preload, preload_first=first))
    line = p.stdout.readline()
    assert line == "ready\n", (line, p.stderr.read())
    return p


def stop(p, sig, timeout=20):
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError(f"still running {timeout} s after {sig.name}")
    return p.returncode, err


def snapshots(d):
    return {f.name: json.loads(f.read_text()) for f in sorted(d.glob("cumemtrace.*.json"))}


def ended(tmp_path, name, cmd, sig, env=None):
    """(traced status, untraced status, snapshots, stderr) of `cmd` stopped by sig."""
    bare_dir = tmp_path / (name + "-bare")
    traced_dir = tmp_path / name
    bare_dir.mkdir()
    traced_dir.mkdir()
    bare, _ = stop(start(cmd, bare_dir, env, preload=False), sig)
    traced, err = stop(start(cmd, traced_dir, env), sig)
    assert list(bare_dir.glob("cumemtrace.*")) == []
    return traced, bare, snapshots(traced_dir), err


C_CASES = [  # (mode, what the record is)
    ("default", "signal"),   # the default action: our handler dumps and re-raises
    ("early", "exit"),       # host handler before the first CUDA call
    ("late", "exit"),        # host handler installed after ours: it replaces ours
]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: s.name)
@pytest.mark.parametrize("mode,reason", C_CASES, ids=[c[0] for c in C_CASES])
def test_c_program_signal(tmp_path, sig, mode, reason):
    traced, bare, snaps, err = ended(tmp_path, mode, [PROGS / "rt_hold", mode], sig)
    assert traced == bare, err
    assert bare == (-sig if mode == "default" else 3)
    (snap,) = snaps.values()
    assert snap["reason"] == reason, err
    if reason == "signal":
        assert snap["signal"] == sig.name
        assert ".signal.0.json" in next(iter(snaps))
        # the report says which signal ended it
        path = tmp_path / mode / next(iter(snaps))
        rep = subprocess.run([str(CLI), "report", str(path)], capture_output=True,
                             text=True)
        assert f"signal snapshot ({sig.name}) at" in rep.stdout, rep.stdout[:600]
    # the 64 MiB block and up to 16 blocks of 1 MiB: held when it ended
    cur = device(snap)["current_bytes"]
    assert 64 * MiB <= cur <= 80 * MiB, cur


def test_host_reraising_the_default_keeps_its_status(tmp_path):
    traced, bare, _, err = ended(tmp_path, "reraise", [PROGS / "rt_hold", "reraise"],
                                 signal.SIGTERM)
    assert traced == bare == -signal.SIGTERM, err
    # the host's handler ran instead of ours: the stream is the record (once
    # the background thread wrote its first checkpoint, right at the start)
    d = tmp_path / "stream"
    d.mkdir()
    p = start([PROGS / "rt_hold", "reraise"], d, {"CUMEMTRACE_FLUSH_MS": "50"})
    deadline = time.monotonic() + 10
    while not list(d.glob("cumemtrace.*.stream")) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # a few flushes: a checkpoint after the first allocation
    status, err = stop(p, signal.SIGTERM)
    assert status == -signal.SIGTERM and snapshots(d) == {}, err
    (stream,) = d.glob("cumemtrace.*.stream")
    r = subprocess.run([str(CLI), "report", str(stream)], capture_output=True, text=True)
    assert r.returncode == 0 and "recovered from a stream" in r.stderr, r.stderr


def test_ignored_signal_stays_ignored(tmp_path):
    p = start([PROGS / "rt_hold", "ignore"], tmp_path)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert p.poll() is None, "SIGTERM was ignored by the host and must stay so"
    p.kill()
    p.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: s.name)
@pytest.mark.parametrize("mode", ["default", "handler"])
def test_python_program_signal(tmp_path, sig, mode):
    cmd = [PYTHON, HOLD_PY, mode, BUILD]
    traced, bare, snaps, err = ended(tmp_path, mode, cmd, sig)
    assert traced == bare, err
    (snap,) = snaps.values()
    if mode == "handler" and sig != signal.SIGINT:
        assert bare == 3 and snap["reason"] == "exit"
    elif sig == signal.SIGINT:
        # KeyboardInterrupt: Python ends by re-raising SIGINT after its
        # finalisation, where Py_AtExit wrote the exit snapshot
        assert bare == -signal.SIGINT and snap["reason"] == "exit", err
    else:
        assert bare == -sig and snap["reason"] == "signal" and snap["signal"] == sig.name
    assert device(snap)["current_bytes"] >= 32 * MiB


def test_signal_inside_cuda_calls_never_hangs_or_corrupts(tmp_path):
    """SIGTERM at random moments of a loop that is almost always inside a
    hook (the tracker's lock may be held): the process ends of SIGTERM
    within the timeout and the snapshot always parses."""
    env = {"RT_HOLD_BUSY": "1"}
    for i in range(12):
        d = tmp_path / f"r{i}"
        d.mkdir()
        p = start([PROGS / "rt_hold", "default"], d, env)
        time.sleep(0.01 * (i % 5))
        status, err = stop(p, signal.SIGTERM, timeout=15)
        assert status == -signal.SIGTERM, err
        snaps = snapshots(d)
        assert len(snaps) == 1, (i, sorted(f.name for f in d.iterdir()), err)
        (snap,) = snaps.values()
        assert snap["reason"] == "signal"
        r = subprocess.run([str(CLI), "report", str(next(d.glob("cumemtrace.*.json")))],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_signal_while_a_wrapper_looks_up_its_real_function_keeps_the_snapshot(tmp_path):
    """A wrapper's first call looks up its real function (dlsym) before it
    enters the tracker's bookkeeping, holding the loader's lock, which the
    dump needs (dladdr).  The handler used to wait there as for a thread
    outside our code: the dump could not finish, and after its 5 s the
    process ended without a snapshot (CI, 2 in ~15 loaded runs of the test
    above: SIGTERM right after "ready", in the first cudaFree).  Here the
    look-up holds the lock for 1.5 s (libslowresolve.so) and SIGTERM lands
    in it."""
    env = base_env({"RT_HOLD_FIRST_CALL": "1"},
                   extra_preload=[PROGS / "libslowresolve.so"])
    p = subprocess.Popen([str(PROGS / "rt_hold"), "default"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_dispositions)
    try:
        assert p.stdout.readline() == "ready\n"
        assert p.stdout.readline() == "resolving\n"
    except AssertionError:
        p.kill()
        raise AssertionError(p.communicate()[1])
    status, err = stop(p, signal.SIGTERM, timeout=30)
    assert status == -signal.SIGTERM, err
    snaps = snapshots(tmp_path)
    assert len(snaps) == 1, (sorted(f.name for f in tmp_path.iterdir()), err)
    (snap,) = snaps.values()
    assert snap["reason"] == "signal" and snap["signal"] == "SIGTERM"
    # the handler returned: the loop ran on (1 MiB blocks) until the dump
    assert 64 * MiB <= device(snap)["current_bytes"] <= 80 * MiB


def test_run_says_what_each_process_wrote(tmp_path):
    env = run_env()
    p = subprocess.Popen([str(CLI), "run", "--", str(PROGS / "rt_hold"), "default"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    # the traced child, not `cumemtrace run` (which would forward it)
    child = int(subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                               text=True).stdout.split()[0])
    os.kill(child, signal.SIGTERM)
    _, err = p.communicate(timeout=20)
    assert p.returncode == 128 + signal.SIGTERM or p.returncode == -signal.SIGTERM
    (f,) = tmp_path.glob("cumemtrace.*.json")
    assert f"  {f}  (signal SIGTERM, pid {child})" in err.splitlines(), err


def test_run_names_a_kept_stream_as_kept(tmp_path):
    """CUMEMTRACE_STREAM=keep leaves the stream beside the exit snapshot:
    `cumemtrace run` said the process 'ended without a snapshot' anyway."""
    r = subprocess.run([str(CLI), "run", "--", str(PROGS / "rt_oom"), "fail_then_dumps", "0",
                        "300"], cwd=tmp_path,
                       env=dict(run_env(), CUMEMTRACE_STREAM="keep", CUMEMTRACE_FLUSH_MS="10",
                                SIMCUDA_MEMORY="256MiB"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (stream,) = tmp_path.glob("cumemtrace.*.stream")
    exit_snap = stream.with_suffix(".json")
    assert exit_snap.exists(), list(tmp_path.iterdir())
    assert "ended without a snapshot" not in r.stderr, r.stderr
    assert re.search(rf"^  {re.escape(str(stream))}  \(stream, pid \d+, kept beside its final "
                     r"snapshot: CUMEMTRACE_STREAM=keep\)$", r.stderr, re.M), r.stderr


def test_run_lists_a_snapshot_whose_path_holds_a_newline(tmp_path):
    # The manifest is a list of lines; a path with a newline in it spans
    # two, and the snapshot written there was called never written.
    out = tmp_path / "a\nb"
    out.mkdir()
    r = subprocess.run([str(CLI), "run", "--output", f"{out}/", "--",
                        str(PROGS / "rt_workload")], cwd=tmp_path, env=run_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    [snap] = out.glob("cumemtrace.*.json")
    assert "cumemtrace: 1 snapshot written:" in r.stderr, r.stderr
    assert "a\\x0ab/" + snap.name in r.stderr, r.stderr  # escaped, one line
    assert "wrote no snapshot" not in r.stderr, r.stderr


def test_run_says_a_snapshot_could_not_be_written(tmp_path):
    # A full disk at exit (here a 4 KiB file size limit; SIGXFSZ ignored
    # gives EFBIG as a full disk gives ENOSPC): the process exited, its
    # write failed - not "ended without exiting (SIGKILL, _exit)".
    import resource

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    r = subprocess.run([str(CLI), "run", "--", str(PROGS / "rt_workload")], cwd=tmp_path,
                       env=run_env({"CUMEMTRACE_STREAM": "off"}), preexec_fn=small_files,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.glob("cumemtrace.*.json")) == []
    assert "ended without exiting" not in r.stderr, r.stderr
    assert re.search(r"^cumemtrace: pid \d+ could not write its exit snapshot "
                     rf"{re.escape(str(tmp_path))}/cumemtrace\.rt_workload\.\d+\.json \(its "
                     r"warning above says why\)$", r.stderr, re.M), r.stderr
    assert "cannot write snapshot" in r.stderr  # the warning it points at


def test_nested_run_lists_the_inner_runs_snapshots(tmp_path):
    r = subprocess.run([str(CLI), "run", "--", str(CLI), "run", "--",
                        str(PROGS / "rt_workload")], cwd=tmp_path, env=run_env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    [snap] = tmp_path.glob("cumemtrace.*.json")
    # the inner listing, then the outer one: both name the file
    assert r.stderr.count("cumemtrace: 1 snapshot written:") == 2, r.stderr
    assert r.stderr.count(f"{snap}  (exit, pid ") == 2, r.stderr
    assert "no snapshot written" not in r.stderr, r.stderr


def test_run_out_of_descriptors_does_not_deny_cuda(tmp_path):
    # A process out of file descriptors at its first CUDA call cannot open
    # the list to say it used CUDA: run must not claim that none did.
    script = tmp_path / "emfile.py"
    script.write_text(
        "import ctypes, os, resource\n"
        "cudart = ctypes.CDLL('libcudart.so.13')\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE,\n"
        "                   (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "fds = []\n"
        "while True:\n"
        "    try:\n"
        "        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
        "    except OSError:\n"
        "        break\n"
        "p = ctypes.c_void_p()\n"
        "cudart.cudaMalloc(ctypes.byref(p), 1 << 20)\n")
    r = subprocess.run([str(CLI), "run", "--", PYTHON, str(script)], cwd=tmp_path,
                       env=run_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Too many open files" in r.stderr, r.stderr  # the library's warning
    last = r.stderr.splitlines()[-1]
    assert last.startswith("cumemtrace: no snapshot written: no process of the command "
                           "used CUDA, or none could say so (a process out of file "
                           "descriptors"), r.stderr


def test_run_no_cuda_only_when_no_cuda(tmp_path):
    env = run_env()
    r = subprocess.run([str(CLI), "run", "--", str(PROGS / "plain")], cwd=tmp_path,
                       env=env, capture_output=True, text=True)
    assert "no process of the command used CUDA" in r.stderr
    # killed before any dump: it used CUDA, and run says so
    r = subprocess.run([str(CLI), "run", "--", "sh", "-c",
                        f"{PROGS / 'rt_hold'} default & sleep 0.5; kill -KILL $!; wait"],
                       cwd=tmp_path, env=dict(env, CUMEMTRACE_STREAM="off"),
                       capture_output=True, text=True)
    assert "used CUDA but wrote no snapshot" in r.stderr, r.stderr
    assert "no process of the command used CUDA" not in r.stderr
    # with the stream on, run names the stream the killed process left
    r = subprocess.run([str(CLI), "run", "--", "sh", "-c",
                        f"{PROGS / 'rt_hold'} default & sleep 0.5; kill -KILL $!; wait"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    (stream,) = tmp_path.glob("cumemtrace.*.stream")
    assert re.search(rf"^  {re.escape(str(stream))}  \(stream, pid \d+ rt_hold ended "
                     "without a snapshot", r.stderr, re.M), r.stderr


def test_torchrun_like_teardown_leaves_every_rank_on_disk(tmp_path):
    """4 ranks; rank 2 runs out of memory and exits 1; the launcher then
    SIGTERMs the others and SIGKILLs, 2 s later, rank 3, which ignores
    SIGTERM.  Every rank's record is on disk and `report DIR` shows four."""
    procs = []
    for rank in range(4):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "4",
               "CUMEMTRACE_FLUSH_MS": "100"}
        if rank == 2:
            env["RT_HOLD_OOM"] = "1"
        mode = "ignore" if rank == 3 else "default"
        procs.append(subprocess.Popen([str(PROGS / "rt_hold"), mode], cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=base_env(env)))
    for rank in (0, 1, 3):
        assert procs[rank].stdout.readline() == "ready\n"
    assert procs[2].wait(timeout=20) == 1
    for rank in (0, 1, 3):
        procs[rank].send_signal(signal.SIGTERM)
    time.sleep(2)
    for rank in (0, 1, 3):
        if procs[rank].poll() is None:
            procs[rank].kill()
    status = [p.wait(timeout=20) for p in procs]
    assert status == [-signal.SIGTERM, -signal.SIGTERM, 1, -signal.SIGKILL]
    names = sorted(f.name for f in tmp_path.glob("cumemtrace.*"))
    reasons = {}
    for f in tmp_path.glob("cumemtrace.*.json"):
        s = json.loads(f.read_text())
        reasons.setdefault(s["process"]["rank"], []).append(s["reason"])
    assert sorted(reasons[0]) == ["signal"] and sorted(reasons[1]) == ["signal"], names
    assert "exit" in reasons[2] and "oom" in reasons[2], names
    assert 3 not in reasons, names
    (stream,) = tmp_path.glob("cumemtrace.*.stream")  # rank 3's, SIGKILLed
    r = subprocess.run([str(CLI), "report", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "4 ranks" in r.stdout or "ranks 0-3" in r.stdout or r.stdout.count("\n") > 4, r.stdout
    assert "recovered from a stream" in r.stderr, r.stderr
    for rank in range(4):
        assert re.search(rf"^\s*{rank}\s", r.stdout, re.M), r.stdout


def test_periodic_snapshots_keep_the_last_k(tmp_path):
    p = start([PROGS / "rt_hold", "early"], tmp_path,
              {"CUMEMTRACE_INTERVAL": "100ms", "CUMEMTRACE_INTERVAL_KEEP": "2"})
    time.sleep(0.75)
    status, err = stop(p, signal.SIGTERM)
    assert status == 3, err
    files = sorted(tmp_path.glob("cumemtrace.*.periodic.*.json"),
                   key=lambda f: int(f.name.split(".")[-2]))
    assert len(files) == 2, [f.name for f in tmp_path.iterdir()]
    n = [int(f.name.split(".")[-2]) for f in files]
    assert n[1] == n[0] + 1 and n[0] >= 3, n  # 5-7 written, the last two kept
    snaps = [json.loads(f.read_text()) for f in files]
    assert all(s["reason"] == "periodic" for s in snaps)
    assert snaps[0]["process"]["dump_time_ns"] < snaps[1]["process"]["dump_time_ns"]
