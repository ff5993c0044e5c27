"""PyTorch's own view in every dump of a running job: a
signal, periodic or API snapshot asks the PyTorch layer for fresh figures
first (src/preload/life/torch_layer.c) - on Python's main thread through
Py_AddPendingCall, waiting at most 200 ms for it to start, or on the dumping
thread when that is the main thread - so its tensors are PyTorch's own
_snapshot() of that moment, grouped by line.  When the main thread cannot
answer (a call that keeps the GIL), the dump goes ahead with the figures it
has and says how old they are.  scenarios/dump_midrun.py freezes its memory,
takes PyTorch's snapshot, then asks for the dump."""
import re

from conftest import MiB, REAL, finish, line_of, start_scenario
from test_tensors import report_json, report_text, side_by_side

import pytest

SCRIPT = "dump_midrun.py"
STEPS = 4
KEPT = STEPS * 12 * MiB  # the HISTORY line's tensors


def run(tmp_path, mode, env=None, traced_only=None):
    """The scenario in `mode`, traced; with the traced_only fixture, the
    session's one run of it (test_memviz.py judges the same dumps)."""
    r = (traced_only(SCRIPT, mode, env=env) if traced_only else
         finish(start_scenario(tmp_path, SCRIPT, mode, traced=True, env=env)))
    (tmp_path / "stderr.txt").write_text(r.stderr)
    assert r.returncode == 0, r.stderr
    assert r.torch is not None, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "Exception" not in r.stderr, r.stderr
    return r


def dumped(r, reason, name=None):
    """(path, snapshot) of the dumps of `reason` (file `name` when given),
    in the order they were written."""
    out = [(f, s) for f, s in zip(r.files, r.snapshots) if s["reason"] == reason and
           (name is None or f.name == name)]
    assert out, [f.name for f in r.files]
    return sorted(out, key=lambda fs: fs[1]["sequence"])


def check_fresh(r, path, snap):
    """The dump's PyTorch figures were read for it, and its tensors are
    PyTorch's own snapshot's by line, to the byte."""
    refresh = snap["allocator_refresh"]
    assert refresh["answered"] is True, refresh
    dev = next(d for d in snap["devices"] if d["ordinal"] == 0)
    a = dev["allocator"]
    assert a["allocated_bytes"] == r.torch["allocated"], (a["allocated_bytes"], r.torch)
    # read after the dump was asked for, and before it was written
    assert refresh["asked_ns"] <= a["reported_ns"] <= snap["process"]["dump_time_ns"]
    rep = report_json(path)
    ours, theirs = side_by_side(r, SCRIPT, rep["devices"][0]["tensors"])
    assert ours[line_of(SCRIPT, "HISTORY")] == [KEPT, STEPS], ours
    assert "older than this snapshot" not in report_text(path)
    return refresh


@pytest.mark.skipif(REAL, reason="CUMEMTRACE_SIGNAL paced for the simulated GPU")
def test_a_signal_dump_of_a_running_loop_has_pytorchs_tensors_of_that_moment(tmp_path,
                                                                            traced_only):
    r = run(tmp_path, "signal", {"CUMEMTRACE_SIGNAL": "USR1"}, traced_only)
    [(path, snap)] = dumped(r, "signal")
    assert snap["signal"] == "SIGUSR1"
    refresh = check_fresh(r, path, snap)
    assert refresh["direct"] is False  # our thread asked the main thread
    print(f"signal dump: the refresh added {refresh['waited_ns'] / 1e6:.1f} ms")


def test_a_periodic_dump_has_pytorchs_tensors_of_that_moment(tmp_path):
    r = run(tmp_path, "periodic", {"CUMEMTRACE_INTERVAL": "300ms",
                                   "CUMEMTRACE_INTERVAL_KEEP": "1000"})
    # the last one whose refresh ran: those written while Python finalises
    # (the layer unregistered from atexit) ask nothing
    path, snap = [(p, s) for p, s in dumped(r, "periodic")
                  if s.get("allocator_refresh", {}).get("answered")][-1]
    refresh = check_fresh(r, path, snap)
    print(f"periodic dump: the refresh added {refresh['waited_ns'] / 1e6:.1f} ms")


def test_an_api_dump_from_the_main_thread_refreshes_on_it(tmp_path, traced_only):
    r = run(tmp_path, "api", traced_only=traced_only)
    [(path, snap)] = dumped(r, "api", "cumemtrace.api.json")
    refresh = check_fresh(r, path, snap)
    assert refresh["direct"] is True  # the main thread itself, no wait
    print(f"api dump (main thread): the refresh added {refresh['waited_ns'] / 1e6:.1f} ms")


def test_an_api_dump_from_another_thread_asks_the_main_thread(tmp_path):
    r = run(tmp_path, "thread")
    [(path, snap)] = dumped(r, "api", "cumemtrace.api.json")
    refresh = check_fresh(r, path, snap)
    assert refresh["direct"] is False
    print(f"api dump (other thread): the refresh added {refresh['waited_ns'] / 1e6:.1f} ms")


def test_a_dump_from_a_sub_interpreter_never_runs_the_layer_and_never_hangs(tmp_path):
    """cumemtrace_dump() from a sub-interpreter: through ctypes.PyDLL (the GIL
    held with the sub-interpreter's state) PyGILState_Ensure deadlocked -
    the run never ended; through ctypes.CDLL the main interpreter's layer ran
    inside the sub-interpreter's call.  Now neither runs the layer: the dump
    is written with the figures last read and no `allocator_refresh` (none
    was asked), and a later dump from the main interpreter is fresh, with
    PyTorch's segment layout: a sub-interpreter importing ctypes clears the
    pointer-type cache CPython 3.11 shares between interpreters, which made
    the layer's own cast fail ("LP_Block instance instead of LP_Block
    instance") and turned the layout off for the rest of the run.
    run() fails on a hang (TIMEOUT)."""
    r = run(tmp_path, "subinterp")
    for how in ("PyDLL", "CDLL"):
        [(path, snap)] = dumped(r, "api", f"cumemtrace.sub-{how}.json")
        assert "allocator_refresh" not in snap, (how, snap["allocator_refresh"])
    [(path, snap)] = dumped(r, "api", "cumemtrace.api.json")
    refresh = check_fresh(r, path, snap)
    assert refresh["direct"] is True
    assert "PyTorch segment layout" not in r.stderr, r.stderr
    assert all(d.get("allocator_segments") for d in snap["devices"]
               if d.get("allocator")), [d.get("allocator_segments") for d in snap["devices"]]


def test_a_main_thread_holding_the_gil_bounds_the_wait_and_the_figures_say_their_age(
        tmp_path):
    r = run(tmp_path, "blocked", {"CUMEMTRACE_INTERVAL": "300ms",
                                  "CUMEMTRACE_INTERVAL_KEEP": "1000"})
    snaps = dumped(r, "periodic")
    answered = [s.get("allocator_refresh", {}).get("answered") for _, s in snaps]
    # those during the sleep: after the scenario saw two answered ones (a
    # dump while Python still imports at start-up may time out too, with
    # no figures yet: "missing")
    first = answered.index(True)
    late = [(p, s) for (p, s), a in zip(snaps[first:], answered[first:]) if a is False]
    assert late, answered
    for path, snap in late:
        refresh = snap["allocator_refresh"]
        # 200 ms for the main thread to take it up, then the dump went ahead
        assert 200e6 <= refresh["waited_ns"] < 1e9, refresh
        a = snap["devices"][0]["allocator"]
        assert a["reported_ns"] < refresh["asked_ns"], (a, refresh)
        # the figures held are the last ones read: before the sleep, the same memory
        assert a["allocated_bytes"] == r.torch["allocated"]
        age = (snap["process"]["dump_time_ns"] - a["reported_ns"]) / 1e9
        text = report_text(path)
        said = re.search(r"PyTorch's figures here are ([\d.]+) (ms|s) older than this "
                         r"snapshot: the PyTorch layer did not answer within ([\d.]+) ms", text)
        assert said, text
        stated = float(said.group(1)) / (1000 if said.group(2) == "ms" else 1)
        assert abs(stated - age) <= 0.051, (stated, age)
    # The periodic dumps did not stall for the 10 s sleep: each waited its
    # bound, and one that was not answered cost the host nothing, so the
    # next came an interval later (pacing counts only what the host spent).
    assert len(snaps) >= 3, [f.name for f in r.files]


def test_no_hang_at_exit_with_dumps_asked_while_python_finalises(tmp_path):
    for i in range(3):
        r = run(tmp_path / f"run{i}", "exit", {"CUMEMTRACE_INTERVAL": "10ms",
                                               "CUMEMTRACE_INTERVAL_KEEP": "1000"})
        assert dumped(r, "exit")
        assert len(dumped(r, "periodic")) >= 1


def test_the_layout_hand_off_cost_is_measured(tmp_path):
    """What handing PyTorch's segment layout over adds to a dump's reading
    (docs/performance.md quotes it, "Dumps in a PyTorch process"): the
    layer's own reading timed without and with it, alternately, in a small
    loop's state and with 4,000 more live blocks.  The layout reuses the
    reading's one memory._snapshot(): a second one, or a cost per block far
    above a few microseconds, would double the reading."""
    import json
    import os
    import subprocess
    import sys
    from conftest import BUILD, CLI, SCENARIOS, SIMGPU
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_"))}
    boot = BUILD / "share" / "cumemtrace" / "torchboot"
    cmd = [] if REAL else [str(SIMGPU), "--build", str(BUILD), "--memory", "4GiB", "--"]
    cmd += [str(CLI), "run", "--output", f"{tmp_path}/", "--", sys.executable,
            str(SCENARIOS / "layout_cost.py"), str(boot)]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    c = json.loads(next(l for l in p.stdout.splitlines() if l.startswith("COST "))[5:])
    for name in ("small", "many"):
        s = c[name]
        print(f"\nlayout hand-off, {s['blocks']} blocks in {s['segments']} segments: a reading "
              f"{s['without_ms']['best']:.1f} ms (median {s['without_ms']['median']:.1f}) "
              f"without it, {s['with_ms']['best']:.1f} ms ({s['with_ms']['median']:.1f}) with it")
    assert c["many"]["blocks"] >= c["extra"] > c["small"]["blocks"], c
    many = c["many"]
    assert many["with_ms"]["best"] < 2 * many["without_ms"]["best"], c
