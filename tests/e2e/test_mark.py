"""The mark API (include/cumemtrace.h: cumemtrace_mark_begin/_end,
cumemtrace_usage) from a CUDA program under the preload: peaks since nested
marks, the refusals, and the snapshot's per-device "mark" section with the
call sites at the innermost mark's peak (tests/progs/rt_mark.c)."""
from conftest import MiB, device


def parse(stdout):
    out = {}
    for line in stdout.splitlines():
        label, _, rest = line.partition(": ")
        out[label] = [int(x) for x in rest.split()]
    return out


def test_nested_marks_give_exact_peaks(run):
    r = run(["rt_mark", "mark.json"])
    got = parse(r.stdout)
    assert got["invalid"] == [-1, -1]
    # label: active current mark_bytes peak_bytes
    assert got["start"] == [1, 8 * MiB, 0, 40 * MiB]        # no mark: the whole run
    assert got["outer"] == [1, 12 * MiB, 8 * MiB, 18 * MiB]
    assert got["inner"] == [1, 14 * MiB, 12 * MiB, 14 * MiB]
    assert got["wrong end"] == [-1]
    assert got["end inner"] == [0]
    assert got["outer again"] == [1, 12 * MiB, 8 * MiB, 18 * MiB]
    assert got["end outer"] == [0]
    assert got["no mark"] == [1, 12 * MiB, 0, 40 * MiB]
    assert got["end none"] == [-1]
    # A forked child starts with an empty tracker and without the parent's marks.
    assert got["child end"] == [-1]
    assert got["child"] == [1, 2 * MiB, 0, 2 * MiB]
    assert "the innermost mark is 2" in r.stderr
    assert "no mark is active" in r.stderr


def test_snapshot_carries_the_mark_and_its_sites(run):
    r = run(["rt_mark", "mark.json"])
    import json
    snap = json.loads((r.cwd / "mark.json").read_text())
    mark = device(snap, 0)["mark"]
    assert mark["depth"] == 2
    assert mark["base_bytes"] == 12 * MiB
    assert mark["peak_bytes"] == 14 * MiB
    assert mark["time_ns"] <= mark["peak_time_ns"]
    sizes = sorted(g["bytes"] for g in mark["at_peak"])
    assert sizes == [2 * MiB, 4 * MiB, 8 * MiB]
    assert sum(sizes) == mark["peak_bytes"]
    # Outside any mark the exit snapshot has no mark section.
    assert "mark" not in device(r.only("exit"), 0)
