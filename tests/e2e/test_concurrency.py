"""Threads, signals, cancellation and the loader: the preloaded library
must never hang the host, and must count what happened exactly."""
import json
import subprocess

from conftest import PROGS, base_env, device


def _run_bounded(tmp_path, args, env=None, timeout=20):
    """Runs a program under the preload; a hang fails the test, never the
    suite (the timeout is generous: the machine may be loaded)."""
    try:
        proc = subprocess.run([str(PROGS / args[0])] + [str(a) for a in args[1:]],
                              cwd=tmp_path, env=base_env(env), timeout=timeout,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return None
    return proc


def test_late_local_runtime_threads_and_dlopen_never_hang(tmp_path):
    # Issue 10.1: first calls on 4 threads resolve real functions by scanning
    # the loaded libraries while the main thread loads and unloads another
    # one 200 times.  Before the fix the scan called dlopen inside
    # dl_iterate_phdr (lock order inversion): about a third of runs hung.
    lib = PROGS / "libunrelated.so"
    for i in range(30):
        out = tmp_path / f"run{i}.json"
        proc = _run_bounded(tmp_path, ["late_threads", lib, 200],
                            env={"CUMEMTRACE_OUTPUT": str(out)})
        assert proc is not None, f"run {i} of 30 hung"
        assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
    snap = json.loads(out.read_text())
    d = device(snap)["by_kind"]["device"]
    assert (d["allocs"], d["frees"]) == (4, 4)
    assert (snap["host_pinned"]["allocs"], snap["host_pinned"]["frees"]) == (4, 4)
    assert snap["counters"]["unknown_frees"] == 0
