"""End-to-end checks of the CLI's views on the golden inputs (tests/golden/
inputs/, made by gen_inputs.py) that a byte-for-byte golden file cannot
express: sums that must equal the snapshot's own figures, valid trace-event
JSON, exit codes, and every malformed input on every subcommand."""
import functools
import json
import re
import subprocess
import sys

import pytest

from conftest import CLI, ROOT, cli
from needs import needs

# Every view here must succeed unless a test says otherwise.
cli = functools.partial(cli, check=True)
INPUTS = ROOT / "tests" / "golden" / "inputs"

pytestmark = needs(CLI.exists(), f"{CLI}", "make cli builds it")


def snap(name):
    return json.loads((INPUTS / name).read_text())


@pytest.mark.parametrize("name", ["exit_train.json", "oom_exhausted.json", "rank2.json",
                                  "diff_new.json", "thinned.json"])
def test_flamegraph_sums_to_peak(name):
    out = cli("flamegraph", INPUTS / name).stdout
    total = 0
    for line in out.splitlines():
        frames, _, count = line.rpartition(" ")
        assert frames and int(count) > 0, line
        assert frames.split(";")[-1].startswith("cu"), "the leaf is the entry point: " + line
        total += int(count)
    assert total == sum(d["peak_bytes"] for d in snap(name)["devices"])


def test_flamegraph_root_first_and_demangled():
    # --all-frames: the framework's frames are folded by default (test_layout)
    out = cli("flamegraph", "--all-frames", INPUTS / "exit_train.json").stdout
    line = next(l for l in out.splitlines() if "model.py:142:forward" in l)
    frames = line.rpartition(" ")[0].split(";")
    assert frames[0] == "/home/alice/proj/train.py:120:main"
    assert frames[-1] == "cudaMalloc"
    assert frames[-2] == ("libc10_cuda.so!c10::cuda::CUDACachingAllocator::Native::"
                          "NativeCachingAllocator::malloc(void**, int, unsigned long, "
                          "CUstream_st*)")
    assert "libtorch_python.so+0x4a1f20" in frames


def test_flamegraph_oom_sums_to_live():
    out = cli("flamegraph", "--at", "oom", INPUTS / "oom_fragmentation.json").stdout
    total = sum(int(l.rpartition(" ")[2]) for l in out.splitlines())
    assert total == sum(g["bytes"] for g in snap("oom_fragmentation.json")["oom"]["live"])


def tensor_lines(args, name):
    """flamegraph's folded lines as {frames (root first): bytes}."""
    out = cli("flamegraph", *args, INPUTS / name).stdout
    return {l.rpartition(" ")[0]: int(l.rpartition(" ")[2]) for l in out.splitlines()}


@pytest.mark.parametrize("at,member", [("live", "tensors"), ("peak", "peak_tensors")])
def test_flamegraph_of_pytorchs_tensors_sums_to_its_figures(at, member):
    """In a PyTorch process the lines are PyTorch's tensor groups, each with
    its whole stack down to the user's line, plus the cache: they sum to
    PyTorch's allocated bytes (at the peak: max_memory_allocated) plus the
    cache, and each group's bytes are on the line of its stack."""
    d = snap("tensors_exit.json")["devices"][0]
    t = d[member]
    lines = tensor_lines(["--at", at, "--all-frames"], "tensors_exit.json")
    assert sum(lines.values()) == t["allocated_bytes"] + t["cache"]["bytes"]
    assert lines.pop("[PyTorch's cache]", 0) == t["cache"]["bytes"]
    for g in t["groups"]:
        if not g["stack"]:
            continue
        whole = ";".join("%s:%d:%s" % (f["file"], f["line"], f["function"])
                         for f in reversed(g["stack"]))
        assert lines.get(whole) == g["bytes"], (whole, lines)
    if at == "peak":
        assert t["allocated_bytes"] == d["allocator"]["peak_allocated_bytes"]


def test_flamegraph_says_when_the_peak_has_no_tensors():
    """A file with PyTorch's tensors at the dump and none at the peak (the
    layer reads the peak's by default, not under CUMEMTRACE_TORCH_PEAK=0):
    --at peak draws the driver's segments and says so on stderr, naming the
    switch."""
    assert snap("tensors_many.json")["devices"][0]["peak_tensors"] is None
    r = cli("flamegraph", INPUTS / "tensors_many.json")
    assert "none at the peak" in r.stderr and "CUMEMTRACE_TORCH_PEAK=0" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1
    assert all(l.rpartition(" ")[0].split(";")[-1].startswith("cu")
               for l in r.stdout.splitlines()), r.stdout
    assert cli("flamegraph", "--at", "live", INPUTS / "tensors_many.json").stderr == ""


def test_diff_says_when_neither_file_has_the_peaks_tensors():
    out = cli("diff", INPUTS / "tensors_many.json", INPUTS / "tensors_many.json").stdout
    assert "Live tensors by line" in out and "The peak's tensors by line" not in out, out
    assert "(neither file has the peak's tensors: PyTorch's layer reads them by default;\n" \
        "  not under CUMEMTRACE_TORCH_PEAK=0, nor when its trace did not reach the peak\n" \
        "  exactly)" in out, out
    out = cli("diff", INPUTS / "tensors_exit.json", INPUTS / "tensors_exit.json").stdout
    assert "The peak's tensors by line" in out and "neither file" not in out, out


def test_flamegraph_segments_flag_keeps_the_drivers_view():
    lines = tensor_lines(["--at", "live", "--segments"], "tensors_exit.json")
    assert sum(lines.values()) == snap("tensors_exit.json")["devices"][0]["current_bytes"]
    assert all(k.split(";")[-1].startswith("cu") for k in lines), lines


def test_flamegraph_at_the_oom_has_pytorchs_groups():
    o = snap("tensors_oom.json")["oom"]["allocator"]["tensors"]
    lines = tensor_lines(["--at", "oom"], "tensors_oom.json")
    assert sum(lines.values()) == o["allocated_bytes"] + o["cache"]["bytes"]
    backward = [k for k in lines if k.startswith("[backward of ")]
    assert backward, lines


@pytest.mark.parametrize("name", ["tensors_exit.json", "tensors_oom.json"])
def test_timeline_tensor_track_at_pytorchs_readings(name, tmp_path):
    """The Chrome trace's series by line: a sample at each reading of
    PyTorch's tensors the file holds (the peak's, the failure's, the
    dump's), each summing to PyTorch's allocated bytes plus its cache then,
    the largest line named with its bytes."""
    out = tmp_path / "trace.json"
    cli("timeline", "--chrome", out, INPUTS / name)
    ev = [e for e in json.loads(out.read_text())["traceEvents"]
          if e["name"] == "device 0 tensors by line"]
    s = snap(name)
    d = s["devices"][0]
    want = {}
    if d.get("peak_tensors") and d["peak_tensors"].get("time_ns") is not None:
        want[d["peak_tensors"]["time_ns"]] = d["peak_tensors"]
    if s.get("oom"):
        want[s["oom"]["time_ns"]] = s["oom"]["allocator"]["tensors"]
    want[s["process"]["dump_time_ns"]] = d["tensors"]
    got = {round(e["ts"] * 1000): e["args"] for e in ev}
    assert set(want) <= set(got), (sorted(want), sorted(got))
    for t, tensors in want.items():
        args = got[t]
        assert sum(args.values()) == tensors["allocated_bytes"] + tensors["cache"]["bytes"]
        top = tensors["groups"][0]
        if top["site"]:
            key = "%s:%d:%s" % (top["site"]["file"].rsplit("/", 1)[-1], top["site"]["line"],
                                top["site"]["function"])
            assert args[key] == sum(g["bytes"] for g in tensors["groups"] if g["site"] and
                                    g["site"] == top["site"]), (key, args)


@pytest.mark.parametrize("name", ["exit_train.json", "thinned.json", "oom_limit.json"])
def test_timeline_chrome_trace(name, tmp_path):
    out = tmp_path / "trace.json"
    r = cli("timeline", "--chrome", out, INPUTS / name)
    assert str(out) in r.stderr
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    assert events and trace["displayTimeUnit"] == "ms"
    for e in events:
        assert e["ph"] in ("M", "C", "i"), e
        assert isinstance(e["name"], str) and isinstance(e["pid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "C":
            assert all(isinstance(v, int) and v >= 0 for v in e["args"].values()), e
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
    doc = snap(name)
    for d in doc["devices"]:
        track = f"device {d['ordinal']}"
        ts = d["peak_time_ns"] / 1000.0
        at_peak = [e for e in events if e["ph"] == "C" and e["name"] == track
                   and abs(e["ts"] - ts) < 0.0005]
        assert at_peak, f"no counter sample of {track} at the peak"
        assert at_peak[-1]["args"]["bytes"] == d["peak_bytes"]
        # the counter never exceeds the peak
        assert max(e["args"]["bytes"] for e in events
                   if e["ph"] == "C" and e["name"] == track) == d["peak_bytes"]
        peaks = [e for e in events if e["ph"] == "i" and e["name"] == "peak " + track]
        assert len(peaks) == 1 and peaks[0]["args"]["peak_bytes"] == d["peak_bytes"]
    if doc["oom"]:
        ooms = [e for e in events if e["ph"] == "i" and e["name"] == "out of memory"]
        assert len(ooms) == 1
        assert ooms[0]["args"]["requested_bytes"] == doc["oom"]["requested_bytes"]
    by_kind = [e for e in events if e["name"].endswith("by kind")]
    assert bool(by_kind) == (doc["events"]["stride"] == 1)


def test_timeline_by_kind_adds_up():
    """Without thinning, the per-kind track sums to the device track."""
    trace = json.loads(cli("timeline", "--format", "chrome", INPUTS / "exit_train.json").stdout)
    total = {e["ts"]: e["args"]["bytes"] for e in trace["traceEvents"]
             if e["ph"] == "C" and e["name"] == "device 0"}
    kinds = [e for e in trace["traceEvents"] if e["name"] == "device 0 by kind"]
    assert kinds
    for e in kinds:
        assert sum(e["args"].values()) == total[e["ts"]]


def test_report_json_model():
    m = json.loads(cli("report", "--json", INPUTS / "exit_train.json",
                       INPUTS / "oom_exhausted.json").stdout)
    assert m["schema"] == "cumemtrace-report" and m["schema_version"] == 1
    assert m["selected"] == 1  # the OOM file has the higher peak
    s0, s1 = m["snapshots"]
    d = s0["devices"][0]
    assert sum(x["bytes"] for x in d["at_peak"]) == d["peak_bytes"]
    assert d["fragmentation"]["waste_bytes"] == (d["fragmentation"]["rounded_bytes"]
                                                 - d["fragmentation"]["requested_bytes"])
    top = d["at_peak"][0]
    assert top["site"] == "/home/alice/proj/model.py:57:__init__"
    assert top["frames"][-1] == "/home/alice/proj/train.py:110:main"
    assert top["entry"] == "cudaMalloc" and top["kinds"] == ["device"]
    assert s0["oom"] is None and s0["process"]["rank"] is None
    assert [a["id"] for a in s0["advice"]] == []  # recovered chains are routine
    assert s1["oom"]["cause"] == "exhausted"
    assert [a["id"] for a in s1["advice"]] == ["untracked", "activations", "whole-run"]
    assert s1["events"]["kept"] == len(snap("oom_exhausted.json")["events"]["data"])


@pytest.mark.parametrize("name,advice", [
    ("oom_exhausted.json", {"activations", "untracked", "whole-run"}),
    ("oom_fragmentation.json", {"refused-while-free", "dominant-site", "small-segments",
                                "granularity"}),
    ("oom_limit.json", {"limit", "dominant-site"}),
    ("exit_train.json", set()),
    ("gate_base.json", {"dominant-site"}),
    ("diff_base.json", set()),
])
def test_advice_triggers(name, advice):
    """Each advice line appears exactly when its measured condition holds."""
    m = json.loads(cli("report", "--json", INPUTS / name).stdout)
    assert {a["id"] for a in m["snapshots"][0]["advice"]} == advice


@pytest.mark.parametrize("name,flags", [
    ("torch/demo_oom.json", []),           # PyTorch's post-mortem without its tensors
    ("tensors_oom.json", ["--segments"]),  # with them, the driver's view asked for
])
def test_pytorch_advice_names_no_line_from_the_segments(name, flags):
    """In a PyTorch process the lines that created cached segments do not
    hold what they hold (freed blocks among it): without the failure's
    tensors the advice names no line as holding memory - no activations
    line from the segments' stacks, no dominant line - and says what this
    request lacked."""
    m = json.loads(cli("report", "--json", *flags, INPUTS / name).stdout)
    adv = m["snapshots"][0]["advice"]
    ids = {a["id"] for a in adv}
    assert "activations" not in ids and "dominant-site" not in ids, adv
    assert "exhausted" in ids, adv
    assert not any("call sites under forward" in a["text"] or
                   re.search(r"holds [\d.]+%", a["text"]) for a in adv), adv


def _with_allocator(tmp_path, base, cause, **facts):
    """A post-mortem as PyTorch's observer completes it (oom.allocator)."""
    doc = snap(base)
    GiB = 1 << 30
    allocator = {"name": "pytorch", "version": "2.15.0", "requested_bytes":
                 doc["oom"]["requested_bytes"], "allocated_bytes": 10 * GiB,
                 "reserved_bytes": 18 * GiB, "active_bytes": 10 * GiB,
                 "reserved_unallocated_bytes": 8 * GiB, "inactive_split_bytes": 8 * GiB,
                 "segments": 37, "num_alloc_retries": 1, "num_ooms": 1,
                 "limit_bytes": None, "device_total_bytes": 24 * GiB,
                 "device_free_bytes": 0,
                 "largest_free_block_bytes": {"small": 1 << 20, "large": 380 << 20},
                 "config": {}}
    allocator.update(facts)
    doc["oom"]["allocator"] = allocator
    doc["oom"]["cause"] = cause
    path = tmp_path / f"{cause}.json"
    path.write_text(json.dumps(doc))
    return path


def _advice(path):
    r = cli("report", "--json", path)
    assert r.returncode == 0, r.stderr
    return [a["id"] for a in json.loads(r.stdout)["snapshots"][0]["advice"]]


def test_allocator_fragmentation_advises_expandable_segments(tmp_path):
    path = _with_allocator(tmp_path, "oom_fragmentation.json", "allocator_fragmentation")
    ids = _advice(path)
    assert "expandable-segments" in ids and "live-holes" not in ids
    assert "refused-while-free" not in ids  # the driver-level line is for driver causes
    text = cli("report", path).stdout
    assert ("8.00 GiB is reserved by PyTorch but unallocated, in 37 segments; the largest "
            "free block is 380 MiB, less than the 2.00 GiB requested") in " ".join(text.split())


def test_expandable_segments_already_on_advises_what_closes_holes(tmp_path):
    # With expandable segments on, the free pieces lie
    # between live tensors; max_split_size_mb cannot join them.
    path = _with_allocator(tmp_path, "oom_fragmentation.json", "allocator_fragmentation",
                           config={"expandable_segments": "True"})
    ids = _advice(path)
    assert "live-holes" in ids and "expandable-segments" not in ids
    text = " ".join(cli("report", path).stdout.split())
    assert "max_split_size" not in text
    assert "holes of at most 380 MiB between live tensors" in text, text


def _with_segments(tmp_path, name, segments, request, free, config=None):
    """A fragmentation post-mortem whose allocator handed over its segments
    (oom.layout.allocator_segments): [(segment bytes, [(bytes, state)])]."""
    MiB = 1 << 20
    segs, addr = [], 0x204000000000
    for size, blocks in segments:
        off, bl = 0, []
        for b, state in blocks:
            bl.append([off * MiB, b * MiB, state])
            off += b
        segs.append({"address": hex(addr), "bytes": size * MiB, "pool": "large",
                     "blocks": bl})
        addr += size * MiB
    unallocated = sum(b for _, bl in segments for b, st in bl if st == "free") * MiB
    largest = max(b for _, bl in segments for b, st in bl if st == "free") * MiB
    path = _with_allocator(tmp_path, "oom_fragmentation.json", "allocator_fragmentation",
                           requested_bytes=request * MiB,
                           reserved_unallocated_bytes=unallocated,
                           largest_free_block_bytes={"small": 0, "large": largest},
                           config=config or {})
    doc = json.loads(path.read_text())
    o = doc["oom"]
    o["free_bytes"] = free * MiB
    o["untracked_bytes"] = max(0, o["total_bytes"] - o["free_bytes"] - o["tracked_bytes"])
    doc["oom"]["layout"] = {
        "base": None, "span_bytes": 0, "count": 0, "bytes": 0, "gap_count": 0,
        "gap_bytes": 0, "largest_gap_bytes": 0, "gaps_at_least_request": 0,
        "allocations": [], "gaps": [], "best_free": None,
        "allocator_segments": {"count": len(segs), "blocks": sum(len(g["blocks"]) for g in segs),
                               "segments": segs}}
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return out


def test_free_blocks_between_live_tensors_in_whole_pages_advise_expandable_segments(tmp_path):
    # Two segments, each a live tensor and a free block smaller than the
    # request: no run joins across their edges, yet expandable segments give
    # the blocks' whole 20 MiB pages back and map new ones - the setting that
    # makes room is advised, and no line says that none does.
    split = [(300, [(200, "allocated"), (100, "free")])] * 2
    path = _with_segments(tmp_path, "split.json", split, request=150, free=4)
    ids = _advice(path)
    assert "expandable-segments" in ids and "live-holes" not in ids, ids
    text = " ".join(cli("report", path).stdout.split())
    assert "no allocator setting" not in text
    assert ("200 MiB of these blocks lies in whole pages, which with the device's 4.00 MiB "
            "free covers the 160 MiB the request takes in pages - it would likely fit "
            "(not verified by a run with it)") in text, text
    # Blocks shorter than a page give nothing back: then the advice says by
    # how much the pages fall short, not that a setting never helps.
    small = [(20, [(10, "allocated"), (10, "free")])] * 4
    path = _with_segments(tmp_path, "small.json", small, request=30, free=4)
    ids = _advice(path)
    assert "live-holes" in ids and "expandable-segments" not in ids, ids
    text = " ".join(cli("report", path).stdout.split())
    assert ("expandable_segments:True would give back only the whole 20.0 MiB pages of free "
            "blocks, 0 B here, which with the device's 4.00 MiB free is less than the "
            "40.0 MiB the request takes in pages") in text, text
    assert "no allocator setting" not in text


def test_what_a_step_lacked_is_said_of_the_step(tmp_path):
    # An expandable segment's 20 MiB cuMemCreate failed with 6 MiB free for
    # PyTorch's 172 MiB request: the 14 MiB shortfall is the step's, and the
    # advice must say so - "this request lacked 14.0 MiB" beside a 172 MiB
    # request and 6 MiB free does not add up.
    MiB = 1 << 20
    path = _with_allocator(tmp_path, "oom_exhausted.json", "exhausted",
                           requested_bytes=172 * MiB)
    doc = json.loads(path.read_text())
    o = doc["oom"]
    o.update(requested_bytes=20 * MiB, entry_point="cuMemCreate", free_bytes=6 * MiB,
             shortfall_bytes=14 * MiB)
    o["untracked_bytes"] = max(0, o["total_bytes"] - o["free_bytes"] - o["tracked_bytes"])
    path.write_text(json.dumps(doc))
    text = " ".join(cli("report", path).stdout.split())
    assert "this request lacked" not in text, text
    assert ("the 20.0 MiB cuMemCreate for PyTorch's 172 MiB request lacked 14.0 MiB "
            "(free 6.00 MiB)") in text, text
    assert "exceeds the 14.0 MiB the 20.0 MiB cuMemCreate for PyTorch's 172 MiB request " \
        "lacked" in text, text


def test_fragmentation_section_reports_pytorchs_cache(tmp_path):
    # The section measured the driver's granularity only: "waste 0 B (0.0%)"
    # for a run whose reserved memory far exceeded its tensors.  With
    # PyTorch's figures in the file it says what the cache holds.
    MiB = 1 << 20
    doc = snap("torch/exit_cache.json")
    a = doc["devices"][0]["allocator"]
    a.update(inactive_split_bytes=10 * MiB, peak_allocated_bytes=50 * MiB)
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(doc))
    text = " ".join(cli("report", path).stdout.split())
    frag = text[text.index("Fragmentation"):]
    assert ("PyTorch's cache: 70.0 MiB reserved, 30.0 MiB in tensors - 40.0 MiB (57.1% of "
            "reserved) cached in freed blocks, 10.0 MiB of it inactive split") in frag, frag
    assert ("at its peak this process held 70.0 MiB on the device, 20.0 MiB more than "
            "PyTorch's tensors ever held at once (50.0 MiB, max_memory_allocated)") in frag


def test_memory_fraction_advice_names_the_cap(tmp_path):
    GiB = 1 << 30
    path = _with_allocator(tmp_path, "oom_limit.json", "allocator_limit",
                           limit_bytes=12 * GiB, reserved_bytes=11 * GiB,
                           reserved_unallocated_bytes=1 * GiB)
    ids = _advice(path)
    assert ids[0] == "memory-fraction" and "untracked" not in ids
    text = " ".join(cli("report", path).stdout.split())
    doc = json.loads(path.read_text())["oom"]
    need = 11 * GiB + doc["requested_bytes"]
    frac = -(-need * 1000 // doc["total_bytes"]) / 1000  # of the device, not the cap
    assert "passes the cap by 1.00 GiB" in text
    assert f"set_per_process_memory_fraction({frac:.3f})" in text, text


def test_no_gpu_size_is_named_from_one_request():
    # The post-mortem says what this request lacked, never "a GPU with at least"
    for name in ("oom_exhausted.json", "oom_fragmentation.json", "oom_limit.json"):
        out = cli("report", INPUTS / name).stdout
        assert "GPU with at least" not in out, name


def test_diff_exact_change_and_marks():
    out = cli("diff", "--bytes", INPUTS / "diff_base.json", INPUTS / "diff_new.json").stdout
    lines = out.splitlines()
    grew = [l for l in lines if l.rstrip().endswith("model.py:142:forward")]
    assert len(grew) == 1 and "+3000000 B" in grew[0], grew
    assert any("NEW" in l and "model.py:200:attention" in l for l in lines)
    assert any("GONE" in l and "optim.py:33:step" in l for l in lines)


@pytest.mark.parametrize("gate,new,status", [
    ("5%", "gate_at5pct.json", 0), ("5%", "gate_over5pct.json", 1),
    ("5MiB", "gate_at5pct.json", 0), ("5MiB", "gate_over5pct.json", 1),
    ("5242880B", "gate_at5pct.json", 0), ("5242880B", "gate_over5pct.json", 1),
    ("4.99999%", "gate_at5pct.json", 1), ("0%", "gate_base.json", 0),
])
def test_gate_exit_codes(gate, new, status):
    r = cli("diff", "--max-growth", gate, INPUTS / "gate_base.json", INPUTS / new, check=False)
    assert r.returncode == status, r.stdout + r.stderr
    assert ("gate FAILED" in r.stdout) == (status == 1)


BAD = {
    "no_such_file.json": "No such file or directory",
    "bad_notjson.json": "not JSON",
    "bad_foreign.json": "not a cumemtrace snapshot",
    "bad_version.json": "format version 2 is newer",
    "bad_truncated.json": "truncated after 1024 bytes",
    "bad_type.json": "devices[0].peak_bytes is a string",
    "bad_contradiction.json": 'breaks the invariant "at_peak sums to peak_bytes"',
}


# Each command line; BAD stands for the malformed file, GOOD for a valid one.
COMMANDS = [["report", "BAD"], ["report", "GOOD", "BAD"], ["report", "--json", "BAD"],
            ["diff", "GOOD", "BAD"], ["diff", "BAD", "GOOD"], ["flamegraph", "BAD"],
            ["timeline", "BAD"], ["timeline", "--format", "chrome", "BAD"],
            ["html", "-o", "-", "GOOD", "BAD"], ["export", "--format", "speedscope", "BAD"],
            ["export", "--format", "pprof", "BAD"]]


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c))
def test_malformed_input(bad, cmd):
    args = [INPUTS / bad if a == "BAD" else INPUTS / "exit_train.json" if a == "GOOD" else a
            for a in cmd]
    r = cli(*args, check=False)
    assert r.returncode == 2
    assert r.stdout == ""  # nothing that could pass for a result
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("cumemtrace: "), r.stderr
    assert BAD[bad] in r.stderr and bad in r.stderr


def test_help_for_every_command():
    for cmd in ["run", "report", "diff", "flamegraph", "timeline", "html", "export"]:
        r = cli(cmd, "--help")
        assert r.stdout.startswith("usage: cumemtrace " + cmd) and "example:" in r.stdout
        assert cli("help", cmd).stdout == r.stdout
    assert "commands:" in cli("--help").stdout
    assert cli("--version").stdout.startswith("cumemtrace ")
    r = cli("frobnicate", check=False)
    assert r.returncode == 2 and "unknown command" in r.stderr


def test_docs_match_help():
    """docs/cli.md quotes each subcommand's usage line."""
    doc = (ROOT / "docs" / "cli.md").read_text()
    for cmd in ["run", "report", "diff", "flamegraph", "timeline", "html", "export"]:
        usage = cli(cmd, "--help").stdout.split("\n\n")[0]
        assert usage in doc, f"docs/cli.md lacks the usage of {cmd}:\n{usage}"
    # ... and every option any --help names (the examples' own aside).
    for cmd in [None, "run", "report", "diff", "flamegraph", "timeline", "html", "export",
                "recover"]:
        text = cli(*([cmd] if cmd else []), "--help").stdout.split("\nexample:")[0]
        for opt in set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text)):
            assert re.search(r"(?<![\w-])" + opt + r"(?![\w-])", doc), \
                f"docs/cli.md does not document {opt} (in {cmd or 'cumemtrace'} --help)"


def test_big_snapshot_smoke(tmp_path):
    """The generator's files load, report, diff; a small size keeps it quick
    (`make bench-cli` times the full 1M-allocation size)."""
    gen = ROOT / "scripts" / "gen_big_snapshot.py"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for seed, f in ((1, a), (2, b)):
        subprocess.run([sys.executable, gen, "--allocations", "20000", "--stacks", "2000",
                        "--events", "5000", "--seed", str(seed), "-o", f], check=True,
                       capture_output=True)
    assert "Call sites at peak" in cli("report", a).stdout
    assert "largest change first" in cli("diff", a, b).stdout
    m = json.loads(cli("report", "--json", a).stdout)
    d = m["snapshots"][0]["devices"][0]
    assert sum(x["bytes"] for x in d["at_peak"]) == d["peak_bytes"]
    assert len(d["at_peak"]) == 2000


@pytest.mark.parametrize("name", sorted(
    str(p.relative_to(INPUTS)) for p in list(INPUTS.glob("*.json")) +
    list(INPUTS.glob("torch/*.json")) if not p.name.startswith("bad_")))
def test_width_holds_for_every_line(name):
    # The churn heading ignored --width 60 (a 74-column line)
    out = cli("report", "--width", "60", INPUTS / name).stdout
    long = [l for l in out.splitlines() if len(l) > 60]
    assert not long, long


def _marked_twice(out):
    """Call sites shown both as NEW and as GONE in one table."""
    rows = [l.split() for l in out.splitlines()]
    new = {tuple(r[r.index("NEW") + 1:]) for r in rows if "NEW" in r}
    gone = {tuple(r[r.index("GONE") + 1:]) for r in rows if "GONE" in r}
    return new & gone


def test_diff_does_not_show_one_line_as_new_and_gone(tmp_path):
    # Plain segments against expandable segments - the same
    # Python line allocates through cudaMalloc in one run and cuMemCreate in
    # the other (different native frames below it): one call site, unchanged.
    base, new = INPUTS / "torch" / "segments_oom.json", INPUTS / "torch" / "expandable_exit.json"
    out = cli("diff", base, new).stdout
    assert not _marked_twice(out), out
    assert "pm_segments.py:17:<module>" not in out.split("OOMs")[0], out
    # the many-rank diff of the same two runs
    for d, f in (("a", base), ("b", new)):
        (tmp_path / d).mkdir()
        (tmp_path / d / f.name).write_bytes(f.read_bytes())
    out = cli("diff", tmp_path / "a", tmp_path / "b").stdout
    sites = out[out.index("Call sites"):out.index("OOMs")]
    assert not _marked_twice(sites), out
    assert "pm_segments.py:17:<module>" not in sites, out


def _holders(path, where):
    rep = json.loads(cli("report", "--json", path).stdout)["snapshots"][0]
    return rep["oom"]["holders"] if where == "oom" else rep["devices"][0][where]


def test_tensor_holders_every_line_with_full():
    """PyTorch's tensors by line: a screen of rows by default, the rest in
    one row; --full lists every line the file has, and the rows and the
    writer's fold add up to PyTorch's allocated bytes."""
    path = INPUTS / "tensors_many.json"
    short = cli("report", "--bytes", path).stdout
    assert "(11 more lines; --full lists them)" in short, short
    full = cli("report", "--bytes", "--full", path).stdout
    assert "more lines; --full" not in full, full
    rows = re.findall(r"^\s+(\d+) B\s+[\d.]+%\s+\d+\s+(model\.py:\d+:block)$", full, re.M)
    assert len(rows) == 30, full
    h = _holders(path, "holders")
    assert [(int(b), l) for b, l in rows] == [(g["bytes"], g["display"]) for g in h["groups"]]
    assert sum(g["bytes"] for g in h["groups"]) + h["more"]["bytes"] == h["total_bytes"]
    assert f"{h['more']['bytes']} B" in full and "(4100 more lines, folded by the writer)" in full


def test_tensor_advice_figures_are_the_rows_beside_them():
    """The activations advice of a post-mortem with PyTorch's tensors counts
    the holders whose stack passes through a forward - the rows of the
    table above it, to the byte - and names the largest of them."""
    path = INPUTS / "tensors_oom.json"
    out = " ".join(cli("report", "--bytes", path).stdout.split())
    m = re.search(r"(\d+) lines under forward hold (\d+) B \(([\d.]+)% of PyTorch's tensors; "
                  r"the largest, (\S+), (\d+) B\)", out)
    assert m, out
    h = _holders(path, "oom")
    fwd = [g for g in h["groups"] if any(f.rsplit(":", 1)[-1] == "forward" for f in g["frames"])]
    assert int(m.group(1)) == len(fwd) and int(m.group(2)) == sum(g["bytes"] for g in fwd)
    assert (m.group(4), int(m.group(5))) == (fwd[0]["display"], fwd[0]["bytes"])
    for g in fwd:  # each counted row is printed in the table above
        assert f"{g['bytes']} B" in out.split("Advice")[0] and g["display"] in out


def test_tensor_dominant_advice_is_the_first_row(tmp_path):
    """At the peak of an exit snapshot, the line holding most of the peak's
    tensors is the table's first row, with its bytes."""
    doc = json.loads((INPUTS / "tensors_exit.json").read_text())
    t = doc["devices"][0]["peak_tensors"]
    t["groups"][0]["bytes"] += 20 << 30
    t["allocated_bytes"] += 20 << 30
    doc["devices"][0]["allocator"]["peak_allocated_bytes"] += 20 << 30
    p = tmp_path / "dominant.json"
    p.write_text(json.dumps(doc))
    out = " ".join(cli("report", "--bytes", p).stdout.split())
    top = _holders(p, "holders_at_peak")["groups"][0]
    assert (f"At the peak of device 0, {top['display']} holds" in out and
            f"({top['bytes']} B of PyTorch's {t['allocated_bytes']} B in tensors)" in out), out


def test_timeline_marks_the_attempt_log(tmp_path):
    """The chrome timeline's OOM marks are the attempt log's, which the
    writer writes in every file: a post-mortem whose log is empty gets no
    mark of its own made up from the post-mortem."""
    doc = snap("oom_exhausted.json")
    attempts = doc["ooms"]["attempts"]
    trace = json.loads(cli("timeline", "--format", "chrome", INPUTS / "oom_exhausted.json").stdout)
    marks = [e for e in trace["traceEvents"] if e["ph"] == "i" and e["name"] in
             ("out of memory", "retry failed", "recovered")]
    assert [(e["ts"], e["args"]["attempt"]) for e in marks] == \
        [(a["t_ns"] / 1000.0, a["attempt"]) for a in attempts]
    doc["ooms"]["attempts"] = []
    p = tmp_path / "no_log.json"
    p.write_text(json.dumps(doc))
    trace = json.loads(cli("timeline", "--format", "chrome", p).stdout)
    assert not [e for e in trace["traceEvents"] if e["name"] == "out of memory"]
