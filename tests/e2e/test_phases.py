"""The program's own phases (docs/snapshot-format.md "phases"): NVTX ranges
received as an NVTX 3 tool (tests/progs/nvtx/rt_nvtx.c, built against
NVIDIA's header) and phases pushed through cumemtrace_phase_push/pop
(tests/progs/rt_phases.c), attributed to every allocation, exact at the
peak, bounded in memory."""
import pytest

from conftest import LIB, PROGS, MiB, device
from needs import TORCH_VENV, needs

NVTX = {"NVTX_INJECTION64_PATH": str(LIB)}
needs_nvtx = needs(
    (PROGS / "rt_nvtx").exists(), "rt_nvtx, built only where an NVTX 3 header is (the "
    "CUDA toolkit's include/nvtx3 or the PyTorch venv's nvidia-nvtx wheel: tests/nvtx.mk)",
    TORCH_VENV + ", then make test-bins")


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
def test_deep_start_end_ranges_leave_when_ended(run):
    # 70 start/end ranges in flight, 6 past what a thread keeps, all ended:
    # nothing stays open, so the next allocation is in no range and the
    # next push is the outermost.
    r = run(["rt_nvtx", "deep_starts"], env=NVTX)
    out = parse(r.stdout)
    assert out["push after"] == 0 and out["pop after"] == 0
    snap = r.only()
    assert snap["phases"]["too_deep"] == 70 - 64
    rows = {path(snap, row["phase"]): row["bytes"] for row in device(snap)["by_phase"]}
    assert rows == {"": 1 * MiB, "after": 2 * MiB}


@needs_nvtx
def test_oom_names_its_phase(run):
    r = run(["rt_nvtx", "oom"], env=NVTX)
    snap = r.only("oom")
    assert path(snap, snap["oom"]["phase"]) == "validation/step 1200"


@needs_nvtx
def test_cumemtrace_run_sees_nvtx_and_reports_by_range(tmp_path):
    import subprocess
    from conftest import CLI, run_env
    env = run_env()
    env.pop("NVTX_INJECTION64_PATH", None)
    r = subprocess.run([str(CLI), "run", "--", str(PROGS / "rt_nvtx"), "nested"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    [snap] = tmp_path.glob("cumemtrace.rt_nvtx.*.json")
    rep = subprocess.run([str(CLI), "report", "--by", "range", str(snap)],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    lines = rep.stdout.splitlines()
    at = lines.index([l for l in lines if "Ranges at peak (6.00 MiB)" in l][0])
    first = lines[at + 2].split()
    assert first[:3] == ["5.00", "MiB", "83.3%"], lines[at:at + 4]
    assert lines[at + 2].rstrip().endswith("validation/step 1200")
    plain = subprocess.run([str(CLI), "report", str(snap)], capture_output=True, text=True,
                           timeout=60).stdout
    assert "--by range" in plain     # the default report points at the view


@needs_nvtx
def test_a_host_with_its_own_nvtx_tool_keeps_it(tmp_path):
    import subprocess
    from conftest import CLI, run_env
    env = run_env({"NVTX_INJECTION64_PATH": str(tmp_path / "no-such-tool.so")})
    r = subprocess.run([str(CLI), "run", "--", str(PROGS / "rt_nvtx"), "nested"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr   # NVTX turns itself off without a tool
    assert r.stderr.count("NVTX_INJECTION64_PATH is already set") == 1
    [snap] = tmp_path.glob("cumemtrace.rt_nvtx.*.json")
    import json
    assert "phases" not in json.loads(snap.read_text())


def test_report_by_range_without_phases_says_nothing_new(run):
    import subprocess
    from conftest import CLI
    r = run(["rt_workload"])
    rep = subprocess.run([str(CLI), "report", "--by", "range", str(r.files[0])],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0
    assert "Ranges at peak" not in rep.stdout and "--by range" not in rep.stdout
    bad = subprocess.run([str(CLI), "report", "--by", "phase", str(r.files[0])],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--by wants stack or range" in bad.stderr


def _cli(*args):
    import subprocess
    from conftest import CLI
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                          timeout=60)


@needs_nvtx
def test_timeline_draws_ranges_beside_memory(run):
    import json
    r = run(["rt_nvtx", "nested"], env=NVTX)
    f = r.files[0]
    text = _cli("timeline", "--ascii", f)
    assert text.returncode == 0, text.stderr
    out = text.stdout.splitlines()
    at = out.index([l for l in out if l.startswith("ranges")][0])
    bands = out[at + 1:at + 5]
    assert [b.split("| ")[-1] for b in bands] == ["train", "validation", "load batch",
                                                 "wide \u00e9t\u00e9"]
    assert all("=" in b for b in bands)
    trace = json.loads(_cli("timeline", "--format", "chrome", f).stdout)
    ev = trace["traceEvents"]
    slices = {e["args"]["path"]: e for e in ev if e.get("cat") == "range" and e["ph"] == "X"}
    assert set(slices) == {"train", "train/step 1", "validation", "validation/step 1200",
                           "load batch", "wide \u00e9t\u00e9"}
    assert slices["load batch"]["args"]["domain"] == "io"
    outer, inner = slices["validation"], slices["validation/step 1200"]
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    assert inner["tid"] == r.only()["process"]["pid"]   # the main thread's track
    assert [e["name"] for e in ev if e.get("cat") == "range" and e["ph"] == "i"] == ["checkpoint"]
    assert any(e["ph"] == "C" and e["name"] == "device 0" for e in ev)  # beside the counters


@needs_nvtx
def test_chrome_trace_start_end_is_an_async_pair(run):
    import json
    r = run(["rt_nvtx", "threads"], env=NVTX)
    ev = json.loads(_cli("timeline", "--format", "chrome", r.files[0]).stdout)["traceEvents"]
    b = [e for e in ev if e.get("cat") == "range" and e["ph"] == "b"]
    e_ = [e for e in ev if e.get("cat") == "range" and e["ph"] == "e"]
    assert len(b) == len(e_) == 1 and b[0]["id"] == e_[0]["id"]
    assert b[0]["name"] == "request 7" and b[0]["ts"] <= e_[0]["ts"]


@needs_nvtx
def test_diff_by_range_matches_ranges_by_path(run):
    a = run(["rt_nvtx", "nested"], env=NVTX).files[0]
    b = run(["rt_nvtx", "threads"], env=NVTX).files[0]
    same = _cli("diff", "--by", "range", a, a)
    assert same.returncode == 0, same.stderr
    # the four ranges that allocated (train and validation only enclose them)
    assert "no range changed" in same.stdout and "(4 ranges unchanged)" in same.stdout
    d = _cli("diff", "--by", "range", "--bytes", a, b)
    assert d.returncode == 0, d.stderr
    peak = d.stdout.split("Ranges at peak")[1].split("Live by range")[0].splitlines()
    step = [l.split() for l in peak if l.rstrip().endswith("validation/step 1200")][0]
    assert step[:7] == [str(5 * MiB), "B", "0", "B", f"-{5 * MiB}", "B", "GONE"], step
    req = [l.split() for l in peak if l.rstrip().endswith("request 7")][0]
    assert req[:7] == ["0", "B", str(2 * MiB), "B", f"+{2 * MiB}", "B", "NEW"], req
    bad = _cli("diff", "--by", "ranges", a, b)
    assert bad.returncode == 2 and "--by wants stack, function, module or range" in bad.stderr


@needs_nvtx
def test_threads_push_pop_end_and_dump_at_once(run):
    r = run(["rt_nvtx", "stress"], env=NVTX)
    snap = r.only()
    check_sums(snap)
    ph = snap["phases"]
    starts = 4 * 5000 // 100
    assert ph["pushes"] == 4 * 5000 * 2 + starts + 1   # and main's "start"
    # every push and pop balanced, each start ended (by another thread) or open
    assert ph["unbalanced_pops"] == 0
    rows = by_path(snap)
    assert sum(v["allocs"] for k, v in rows.items() if k.startswith("worker")) + \
        sum(v["allocs"] for k, v in rows.items() if k.startswith("batch")) == 4 * 5000
    assert rows[""]["allocs"] == 1   # main's, before the threads
    assert len([f for f in r.files if ".api." in f.name]) == 3


def _with_phases(peak_extra=0, current_extra=0, phase=1):
    """The golden generator's exit snapshot with two phases: "a" holding
    everything at the peak and now, and phase `phase` referenced by a row."""
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests" / "golden"))
    import gen_inputs
    doc = gen_inputs.exit_train()
    d = doc["devices"][0]
    doc["phases"] = {"count": 1, "pushes": 1, "overflow": 0, "unbalanced_pops": 0,
                     "too_deep": 0, "dropped_starts": 0,
                     "list": [{"id": 1, "parent": 0, "name": "a", "source": "nvtx",
                               "domain": None}],
                     "ranges": {"recorded": 1, "cap": 65536,
                                "columns": ["start_ns", "end_ns", "thread", "phase", "kind"],
                                "data": [[0, 10, 1, 1, "push"]]}}
    d["by_phase"] = [{"phase": phase, "bytes": d["current_bytes"] + current_extra, "count": 1,
                      "at_peak_bytes": d["peak_bytes"] + peak_extra, "at_peak_count": 1,
                      "allocs": 1, "bytes_allocated": d["peak_bytes"], "top_at_peak": []}]
    row = d["by_phase"][0]
    row["sites"] = [[doc["stacks"][0]["id"], row["at_peak_bytes"], row["bytes"], 1,
                     row["bytes_allocated"]]]  # one call site holds the row's bytes
    return doc


def _with_sites(peak_extra, current_extra):
    """_with_phases with its call site's bytes off the row's by the extras."""
    doc = _with_phases()
    site = doc["devices"][0]["by_phase"][0]["sites"][0]
    site[1] += peak_extra
    site[2] += current_extra
    return doc


def test_by_phase_row_without_sites_is_malformed(tmp_path):
    """The writer lists every row's call sites; a row without them is a
    broken file, refused in one line that names the row."""
    import json
    doc = _with_phases()
    del doc["devices"][0]["by_phase"][0]["sites"]
    bad = tmp_path / "nosites.json"
    bad.write_text(json.dumps(doc))
    for cmd in (["report"], ["export", "--format", "pprof", "-o", str(tmp_path / "p.pb.gz")]):
        r = _cli(*cmd, bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert 'devices[0].by_phase[0] has no "sites"' in r.stderr, r.stderr


@pytest.mark.parametrize("doc,rule", [
    (lambda: _with_phases(peak_extra=1), "phases: at_peak_bytes sum to peak_bytes"),
    (lambda: _with_phases(current_extra=-1), "phases: at_peak_bytes sum to peak_bytes"),
    (lambda: _with_sites(1, 0), "phases: a phase's sites sum to its bytes"),
    (lambda: _with_sites(0, -1), "phases: a phase's sites sum to its bytes"),
], ids=["at_peak past the peak", "bytes short of current", "sites past the phase's peak",
        "sites short of its bytes"])
def test_reader_checks_by_phase(doc, rule, tmp_path):
    import json
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(_with_phases()))
    r = _cli("report", "--by", "range", ok)
    assert r.returncode == 0, r.stderr
    assert "(outside every range)" not in r.stdout and "  a\n" in r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc()))
    r = _cli("report", bad)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f'breaks the invariant "{rule}"' in r.stderr
    unlisted = tmp_path / "unlisted.json"
    unlisted.write_text(json.dumps(_with_phases(phase=7)))
    r = _cli("report", unlisted)
    assert r.returncode == 2 and "refers to phase 7" in r.stderr, r.stderr


# ---- phases in report --json, the exports and the multi-rank report ----

def _range_rows(stdout):
    """The "Ranges at peak" rows of `report --by range --bytes`:
    [(at_peak_bytes, count, now_bytes, allocs, range)]."""
    lines = stdout.splitlines()
    at = lines.index([l for l in lines if "Ranges at peak" in l][0])
    rows = []
    for line in lines[at + 2:]:
        parts = line.split()
        if not parts or "most at peak:" in line:
            if not parts:
                break
            continue
        if len(parts) < 8 or parts[1] != "B" or parts[5] != "B":
            break
        rows.append((int(parts[0]), int(parts[3]), int(parts[4]), int(parts[6]),
                     " ".join(parts[7:])))
    return rows


@needs_nvtx
def test_report_json_has_the_range_table(run):
    import json
    r = run(["rt_nvtx", "nested"], env=NVTX)
    f = r.files[0]
    text = _cli("report", "--by", "range", "--bytes", f)
    assert text.returncode == 0, text.stderr
    rows = _range_rows(text.stdout)
    assert len(rows) == 4 and rows[0][4] == "validation/step 1200", rows
    js = _cli("report", "--json", f)
    assert js.returncode == 0, js.stderr
    dev = json.loads(js.stdout)["snapshots"][0]["devices"][0]
    got = [(x["at_peak_bytes"], x["at_peak_count"], x["bytes"], x["allocs"], x["range"])
           for x in dev["by_range"]]
    assert got == rows                               # same rows, same bytes, same order
    assert sum(x["at_peak_bytes"] for x in dev["by_range"]) == dev["peak_bytes"]
    assert dev["by_range_rest"] is None
    first = dev["by_range"][0]
    assert first["source"] == "nvtx" and first["bytes_allocated"] == 5 * MiB
    assert sorted(t["bytes"] for t in first["top_at_peak"]) == [2 * MiB, 3 * MiB]
    # --top cuts the table as the text's "(N more ranges)" row does
    two = json.loads(_cli("report", "--json", "--top", "2", f).stdout)
    d2 = two["snapshots"][0]["devices"][0]
    assert [x["range"] for x in d2["by_range"]] == [x[4] for x in rows[:2]]
    assert d2["by_range_rest"] == {"ranges": 2, "at_peak_bytes": 0, "at_peak_count": 0,
                                   "bytes": sum(x[2] for x in rows[2:]),
                                   "allocs": sum(x[3] for x in rows[2:])}
    plain = json.loads(_cli("report", "--json", run(["rt_workload"]).files[0]).stdout)
    assert plain["snapshots"][0]["devices"][0]["by_range"] is None


def _pprof_samples(data):
    """[(stack location ids, values, {label key: str})] of a pprof profile."""
    import gzip
    from test_export import _fields, _ints
    f = list(_fields(gzip.decompress(data)))
    strings = [v.decode() for n, _, v in f if n == 6]
    out = []
    for n, _, v in f:
        if n != 2:
            continue
        m = list(_fields(v))
        labels = {}
        for ln, _, lv in m:
            if ln == 3:
                lab = list(_fields(lv))
                labels[strings[_ints(lab, 1)[0]]] = strings[(_ints(lab, 2) or [0])[0]]
        out.append((tuple(_ints(m, 1, signed=False)), _ints(m, 2), labels))
    return out


@needs_nvtx
def test_exports_carry_ranges(run, tmp_path):
    import json
    import pickle
    r = run(["rt_nvtx", "nested"], env=NVTX)
    f, snap = r.files[0], r.only()
    rows = by_path(snap)
    peak = device(snap)["peak_bytes"]
    # pprof: one sample per (stack, range), labelled range=<path>
    assert _cli("export", "--format", "pprof", f, "-o", tmp_path / "p.pb.gz").returncode == 0
    samples = _pprof_samples((tmp_path / "p.pb.gz").read_bytes())
    assert all("range" in s[2] for s in samples)
    per_range = {}
    for _, vals, lab in samples:
        per_range[lab["range"]] = per_range.get(lab["range"], 0) + vals[0]
    assert per_range == {k: v["at_peak_bytes"] for k, v in rows.items()}
    assert sum(per_range.values()) == peak
    # speedscope: "at peak, by range", ranges as frames above the call sites
    assert _cli("export", "--format", "speedscope", f, "-o", tmp_path / "s.json").returncode == 0
    sc = json.loads((tmp_path / "s.json").read_text())
    frames = sc["shared"]["frames"]
    [prof] = [p for p in sc["profiles"] if p["name"] == "device 0 at peak, by range"]
    assert sum(prof["weights"]) == prof["endValue"] == peak
    tops = {}
    for smp, w in zip(prof["samples"], prof["weights"]):
        names = [frames[i]["name"] for i in smp]
        assert frames[smp[0]].get("file") == "nvtx"
        key = "/".join(names[:2]) if names[0] in ("train", "validation") else names[0]
        tops[key] = tops.get(key, 0) + w
    assert tops == {k: v["at_peak_bytes"] for k, v in rows.items() if v["at_peak_bytes"]}
    # memory_viz: PyTorch's external_annotations, START/END by time
    assert _cli("export", "--format", "memory_viz", f, "-o", tmp_path / "m.pickle").returncode == 0
    ann = pickle.loads((tmp_path / "m.pickle").read_bytes())["external_annotations"]
    assert {a["stage"] for a in ann} == {"START", "END"}
    assert [a["time_us"] for a in ann] == sorted(a["time_us"] for a in ann)
    names = [a["name"] for a in ann if a["stage"] == "START"]
    assert set(names) == {"train", "train/step 1", "validation", "validation/step 1200",
                          "load batch", "wide \u00e9t\u00e9", "checkpoint"}
    assert names.index("validation") < names.index("validation/step 1200")
    assert sum(a["stage"] == "END" for a in ann) == len(names)


@needs_nvtx
def test_multi_rank_report_names_each_ranks_peak_range(tmp_path):
    import subprocess
    from conftest import base_env
    d = tmp_path / "job"
    d.mkdir()
    for rank, mode in ((0, "nested"), (1, "threads")):
        env = base_env(dict(NVTX, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2"))
        p = subprocess.run([str(PROGS / "rt_nvtx"), mode], cwd=d, env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    rep = _cli("report", d)
    assert rep.returncode == 0, rep.stderr
    lines = rep.stdout.splitlines()
    head = [l for l in lines if l.split()[:1] == ["rank"] and "peak in" in l]
    assert head, rep.stdout
    at = lines.index(head[0])
    row0, row1 = lines[at + 1], lines[at + 2]
    assert row0.split()[0] == "0" and "validation/step 1200" in row0, rep.stdout
    # rank 1 reached its peak outside every range (its ranges are on threads)
    assert row1.split()[0] == "1" and row1.split()[6] == "-", rep.stdout
    single = _cli("report", d / [p.name for p in d.glob("*.json")][0])
    assert "peak in" not in single.stdout   # the one-process report is unchanged
