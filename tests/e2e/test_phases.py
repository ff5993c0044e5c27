"""The program's own phases (docs/snapshot-format.md "phases"): NVTX ranges
received as an NVTX 3 tool (tests/progs/nvtx/rt_nvtx.c, built against
NVIDIA's header) and phases pushed through cumemtrace_phase_push/pop
(tests/progs/rt_phases.c), attributed to every allocation, exact at the
peak, bounded in memory."""
import pytest

from conftest import LIB, PROGS, MiB, device

NVTX = {"NVTX_INJECTION64_PATH": str(LIB)}
needs_nvtx = pytest.mark.skipif(
    not (PROGS / "rt_nvtx").exists(),
    reason="rt_nvtx not built: no NVTX 3 header (CUDA toolkit's include/nvtx3 or "
           "the nvidia-nvtx wheel of the PyTorch venv), see tests/nvtx.mk")


def parse(stdout):
    out = {}
    for line in stdout.splitlines():
        label, _, rest = line.partition(": ")
        out[label] = int(rest)
    return out


def names(snap):
    return {p["id"]: p for p in snap["phases"]["list"]}


def path(snap, pid):
    ps, parts = names(snap), []
    while pid:
        parts.append(ps[pid]["name"])
        pid = ps[pid]["parent"]
    return "/".join(reversed(parts))


def by_path(snap, ordinal=0):
    """{path: by_phase row} of a device ('' is outside every phase)."""
    return {path(snap, r["phase"]): r for r in device(snap, ordinal)["by_phase"]}


def check_sums(snap, ordinal=0):
    d = device(snap, ordinal)
    assert sum(r["at_peak_bytes"] for r in d["by_phase"]) == d["peak_bytes"]
    assert sum(r["bytes"] for r in d["by_phase"]) == d["current_bytes"]


def test_api_phases_nest_per_source(run):
    r = run(["rt_phases"])
    got = parse(r.stdout)
    assert got["pop nothing"] == -1
    assert (got["push data"], got["push forward"], got["push inner"]) == (0, 1, 2)
    assert got["pop inner"] == 2     # the innermost "app" phase: inner, not forward
    assert (got["pop forward"], got["pop backward"], got["pop data"]) == (1, 1, 0)
    assert got["pop app again"] == -1
    snap = r.only()
    check_sums(snap)
    rows = by_path(snap)
    assert rows["data/forward/inner"]["at_peak_bytes"] == 4 * MiB
    assert rows["data/forward/inner"]["bytes"] == 0
    assert rows["data/forward"]["bytes"] == 2 * MiB
    assert rows["data"]["bytes"] == 2 * MiB
    # after "inner" closed, forward was the thread's phase again
    assert rows["data/backward"]["bytes"] == 1 * MiB
    ps = names(snap)
    assert {p["source"] for p in ps.values() if p["id"] > 1} == {"app", "torch"}
    assert snap["phases"]["unbalanced_pops"] == 2
    # the live and at_peak groups stay one per call site
    d = device(snap)
    assert len({g["stack"] for g in d["live"]}) == len(d["live"])


def test_without_phases_the_snapshot_has_none(run):
    snap = run(["rt_workload"]).only()
    assert "phases" not in snap
    assert "by_phase" not in device(snap)


@needs_nvtx
def test_nvtx_ranges_are_phases(run):
    r = run(["rt_nvtx", "nested"], env=NVTX)
    got = parse(r.stdout)
    assert (got["push train"], got["push step"], got["pop step"], got["pop train"]) == (0, 1, 1, 0)
    snap = r.only()
    check_sums(snap)
    rows = by_path(snap)
    assert device(snap)["peak_bytes"] == 6 * MiB
    assert rows["validation/step 1200"]["at_peak_bytes"] == 5 * MiB
    assert rows["validation/step 1200"]["at_peak_count"] == 2
    assert rows["train/step 1"]["bytes"] == 1 * MiB
    assert rows["train/step 1"]["at_peak_bytes"] == 1 * MiB
    assert rows["load batch"]["bytes_allocated"] == 4 * MiB
    assert rows["wide \u00e9t\u00e9"]["allocs"] == 1
    ps = names(snap)
    io = [p for p in ps.values() if p["name"] == "load batch"][0]
    assert (io["source"], io["domain"]) == ("nvtx", "io")
    kinds = {(path(snap, row[3]), row[4]) for row in snap["phases"]["ranges"]["data"]}
    assert ("checkpoint", "mark") in kinds
    assert ("validation/step 1200", "push") in kinds
    for start, end, _tid, _ph, _k in snap["phases"]["ranges"]["data"]:
        assert end is not None and start <= end


@needs_nvtx
def test_without_the_injection_nvtx_is_not_seen(run):
    snap = run(["rt_nvtx", "nested"]).only()
    assert "phases" not in snap


@needs_nvtx
def test_start_end_across_threads(run):
    snap = run(["rt_nvtx", "threads"], env=NVTX).only()
    check_sums(snap)
    rows = by_path(snap)
    assert rows["request 7"]["bytes"] == 2 * MiB
    assert rows[""]["bytes"] == 1 * MiB  # allocated after another thread ended it
    [req] = [row for row in snap["phases"]["ranges"]["data"] if row[4] == "startend"]
    assert req[1] is not None


@needs_nvtx
def test_unbalanced_pops_change_nothing(run):
    r = run(["rt_nvtx", "unbalanced"], env=NVTX)
    got = parse(r.stdout)
    assert got["pop empty"] < 0 and got["pop empty again"] < 0
    assert got["pop other"] < 0      # another domain's pop leaves "balanced" open
    assert got["pop"] == 0
    snap = r.only()
    assert by_path(snap)["balanced"]["bytes"] == 1 * MiB
    assert snap["phases"]["unbalanced_pops"] == 3


@needs_nvtx
def test_many_distinct_names_stay_bounded(run):
    n = 100_000
    snap = run(["rt_nvtx", "many", n], env=NVTX).only()
    check_sums(snap)
    ph = snap["phases"]
    assert ph["count"] == 16384      # the limit of distinct paths
    assert ph["pushes"] == n + 1
    assert ph["overflow"] == n - (16384 - 1) + 1  # "after" came past the limit too
    d = device(snap)
    total = sum(r["allocs"] for r in d["by_phase"])
    assert total == n + 1            # every allocation counted, in some phase
    over = [r for r in d["by_phase"] if r["phase"] == 1][0]
    assert over["allocs"] == ph["overflow"]
    assert over["bytes"] == 1 * MiB  # "after"'s allocation, kept
    assert len(ph["ranges"]["data"]) == 65536  # the latest ranges only
    assert ph["ranges"]["recorded"] == n + 1


@needs_nvtx
def test_deep_nesting_is_counted(run):
    r = run(["rt_nvtx", "deep"], env=NVTX)
    assert parse(r.stdout)["last pop"] == 0
    snap = r.only()
    assert snap["phases"]["too_deep"] == 80 - 64
    [row] = device(snap)["by_phase"]
    assert path(snap, row["phase"]).endswith("level 62/level 63")


@needs_nvtx
def test_oom_names_its_phase(run):
    r = run(["rt_nvtx", "oom"], env=NVTX)
    snap = r.only("oom")
    assert path(snap, snap["oom"]["phase"]) == "validation/step 1200"
