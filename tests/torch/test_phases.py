"""NVTX ranges of a PyTorch program as phases (docs/snapshot-format.md
"phases"): torch.cuda.nvtx and emit_nvtx() on the simulated GPU under
`cumemtrace run`, which sets NVTX_INJECTION64_PATH; the segments each range
made, judged to the byte against PyTorch's own memory_reserved()."""
from conftest import MiB


def paths(snap):
    ps = {p["id"]: p for p in snap["phases"]["list"]}

    def path(pid):
        parts = []
        while pid:
            parts.append(ps[pid]["name"])
            pid = ps[pid]["parent"]
        return "/".join(reversed(parts))
    return ps, path


def test_nvtx_ranges_of_pytorch(scenario):
    r = scenario("nvtx_ranges.py")
    t = r.torch
    snap = r.only("exit")
    dev = r.device()
    ps, path = paths(snap)
    rows = {path(row["phase"]): row for row in dev["by_phase"]}
    assert rows["train"]["bytes"] == t["in_train"] == 64 * MiB
    assert rows["validation/step 1200"]["bytes"] == t["in_validation"] == 128 * MiB
    assert rows[""]["bytes"] == t["outside"]
    assert sum(row["bytes"] for row in dev["by_phase"]) == t["reserved"] == dev["current_bytes"]
    assert sum(row["at_peak_bytes"] for row in dev["by_phase"]) == dev["peak_bytes"] \
        == t["max_reserved"]
    # emit_nvtx(): autograd names each op's range ("aten::mul, seq = 0, op_id = 1")
    ops = [p["name"] for p in ps.values() if p["name"].startswith("aten::")]
    assert any(n.startswith("aten::mul") for n in ops), ops
    assert all(p["source"] == "nvtx" for p in ps.values() if p["id"] > 1)
    assert snap["phases"]["unbalanced_pops"] == 0


def test_deep_start_end_ranges_of_pytorch_leave_when_ended(scenario):
    # range_push's level (on stderr): 0 when nothing of the 70 ended ranges
    # stays open.
    r = scenario("nvtx_deep_starts.py")
    assert "level 0" in r.stderr, r.stderr
    snap = r.only("exit")
    ps, path = paths(snap)
    rows = {path(row["phase"]): row["bytes"] for row in r.device()["by_phase"]}
    assert rows["after"] == 64 * MiB and "request" not in rows and "request/after" not in rows
    assert rows[""] == r.torch["reserved"] - 64 * MiB
