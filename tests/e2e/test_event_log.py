"""The event log under load: thinning past the cap keeps both allocations
and frees with exact `current`, and the largest cap costs no memory or time
until events arrive."""
import os
import subprocess

from conftest import PROGS, SAN_RUNTIME, base_env


def rows_of(snap):
    return [tuple(r) for r in snap["events"]["data"]]


def test_thinning_keeps_allocs_and_frees_with_exact_current(run):
    # one thread: 50 allocations, 50 frees, then 2000 alloc/free pairs of
    # 512 B - periodic, the workload that keeping every 2^k-th event aliases
    full = run(["rt_workload", "threads", "1"]).only("exit")
    thin = run(["rt_workload", "threads", "1"],
               env={"CUMEMTRACE_EVENTS": "64"}).only("exit")
    truth = rows_of(full)
    assert len(truth) == 4100 and not full["events"]["thinned"]
    kept = rows_of(thin)
    ev = thin["events"]
    assert ev["thinned"] and ev["recorded"] == 4100 and len(kept) <= 64
    # every kept row is one of the real events, in order, with the exact
    # running `current` (times differ between the two runs: compare the rest)
    it = iter(r[1:] for r in truth)
    assert all(any(r[1:] == t for t in it) for r in kept), \
        "a kept row is not an event of the run, or is out of order"
    allocs = sum(1 for r in kept if r[3] > 0)
    frees = sum(1 for r in kept if r[3] < 0)
    assert allocs >= len(kept) // 3 and frees >= len(kept) // 3, (allocs, frees)
    # the peak (all 50 blocks live) and the trough after it both survive
    peak = max(r[5] for r in truth)
    assert max(r[5] for r in kept) == peak
    assert min(r[5] for r in kept) == 0


def _measure(env):
    """(max RSS in KiB, CPU seconds) of one run of a few allocations: CPU
    time, user and system (an up-front cost would be page faults or a
    fill), not wall time, which a loaded machine stretches (27 ms against
    8.4 ms once, at load 5, with nothing up front)."""
    p = subprocess.Popen([str(PROGS / "rt_workload"), "basic"], env=env,
                         cwd=env["CUMEMTRACE_OUTPUT"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.returncode == 0, err
    return usage.ru_maxrss, cpu, err


def test_largest_event_cap_costs_nothing_up_front(tmp_path):
    out = str(tmp_path)
    default_env = base_env({"CUMEMTRACE_OUTPUT": out})
    max_env = base_env({"CUMEMTRACE_OUTPUT": out,
                        "CUMEMTRACE_EVENTS": str(1 << 28)})
    runs = {"default": [], "max": []}
    for _ in range(3):  # interleaved, best of three: the machine is shared
        runs["default"].append(_measure(default_env))
        runs["max"].append(_measure(max_env))
    rss = {k: min(r[0] for r in v) for k, v in runs.items()}
    cpu = {k: min(r[1] for r in v) for k, v in runs.items()}
    slack = 1.5 if not SAN_RUNTIME else 3  # ASan's shadow pages vary
    assert rss["max"] <= rss["default"] * slack, rss
    assert cpu["max"] <= cpu["default"] * 3, cpu
    # a cap beyond an eighth of the machine's memory is lowered, with a
    # warning that says to what
    machine = (os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
               // 8 // 32)
    warned = "CUMEMTRACE_EVENTS=268435456" in runs["max"][0][2]
    assert warned == (machine < 1 << 28), runs["max"][0][2]
