"""The tensor model (docs/snapshot-format.md devices[].tensors,
oom.allocator.tensors): every live block of PyTorch's memory, grouped by the
first frame of the user's own code, all groups kept, the whole stack.  Each
test puts PyTorch's own torch.cuda.memory._snapshot() (scenarios/truth.py),
grouped here by the first frame in the scenario's own file, side by side
with the snapshot's groups: the same lines with the same bytes and counts."""
import collections
import json
import pickle
import re

import pytest

from conftest import MiB, SCENARIOS, cli, line_of

N = 1 << 20  # tm_peak.py's elements a tensor


def torch_groups(run, name="torch_snapshot.pickle"):
    """PyTorch's live blocks on device 0 by the first frame in a scenario
    file: {(file name, line) or None: [bytes, count]}."""
    snap = pickle.loads((run.files[0].parent / name).read_bytes())
    out = collections.defaultdict(lambda: [0, 0])
    for seg in snap["segments"]:
        if seg["device"] != 0:
            continue
        for b in seg["blocks"]:
            if b["state"] != "active_allocated":
                continue
            key = next(((f["filename"].rsplit("/", 1)[-1], f["line"])
                        for f in b.get("frames") or []
                        if f["filename"].startswith(str(SCENARIOS) + "/")), None)
            out[key][0] += b["size"]
            out[key][1] += 1
    return dict(out)


def our_groups(tensors):
    """The snapshot's tensors object in the same shape, checked whole."""
    out = collections.defaultdict(lambda: [0, 0])
    for g in tensors["groups"]:
        site = g["site"]
        key = (site["file"].rsplit("/", 1)[-1], site["line"]) if site else None
        out[key][0] += g["bytes"]
        out[key][1] += g["count"]
        if site is not None:
            assert site in g["stack"], g  # the site is a frame of the whole stack
    more = tensors["more"] or {"bytes": 0, "count": 0}
    assert tensors["allocated_bytes"] == sum(b for b, _ in out.values()) + more["bytes"]
    assert tensors["count"] == sum(c for _, c in out.values()) + more["count"]
    sizes = [g["bytes"] for g in tensors["groups"]]
    assert sizes == sorted(sizes, reverse=True), sizes
    return dict(out)


def test_gpt2_forward_oom_names_every_line_through_transformers(scenario):
    # test_tensor_views.py's run of the same forward OOM (its flamegraph)
    r = scenario("tensors_gpt2_oom.py", memory="3GiB")
    assert r.torch["raised"]
    pm = r.only("oom")
    tensors = pm["oom"]["allocator"]["tensors"]
    ours, theirs = our_groups(tensors), torch_groups(r)
    assert ours == theirs, (ours, theirs)
    assert tensors["allocated_bytes"] == pm["oom"]["allocator"]["allocated_bytes"]
    for mark in ("TO", "IDS", "FORWARD"):
        assert ("tensors_gpt2_oom.py", line_of("tensors_gpt2_oom.py", mark)) in ours, \
            (mark, ours)
    # the forward's activations: allocated in transformers' and torch's
    # code, named by this file's line beneath them
    fwd = next(g for g in tensors["groups"] if g["site"] and
               g["site"]["line"] == line_of("tensors_gpt2_oom.py", "FORWARD"))
    assert any("/transformers/" in f["file"] for f in fwd["stack"]), fwd["stack"]
    assert fwd["stack"][0] != fwd["site"], fwd["stack"]
    cache = tensors["cache"]
    assert cache["bytes"] == pm["oom"]["allocator"]["reserved_unallocated_bytes"]
    assert cache["segments"] == pm["oom"]["allocator"]["segments"]


def test_backward_oom_groups_equal_pytorchs(scenario):
    r = scenario("tensors_backward_oom.py", memory="1536MiB")
    assert r.torch["raised"]
    ours = our_groups(r.only("oom")["oom"]["allocator"]["tensors"])
    assert ours == torch_groups(r), (ours, torch_groups(r))
    for mark in ("WEIGHT", "INPUT", "ACT1"):
        assert ("tensors_backward_oom.py", line_of("tensors_backward_oom.py", mark)) in ours


def test_exit_tensors_are_all_groups(scenario):
    r = scenario("tensors_leak.py")
    d = r.device("exit")
    ours = our_groups(d["tensors"])
    assert ours == torch_groups(r), (ours, torch_groups(r))
    assert d["tensors"]["allocated_bytes"] == r.torch["allocated"]
    assert d["tensors"]["cache"]["bytes"] == r.torch["reserved"] - r.torch["allocated"]


def test_no_history_no_tensors(scenario):
    r = scenario("tensors_leak.py", env={"CUMEMTRACE_TORCH_HISTORY": "0"})
    assert r.device("exit")["tensors"] is None


def test_the_programs_own_history_is_kept(scenario):
    # bare and traced print the same traces (the fixture compares stdout)
    r = scenario("tm_user_history.py")
    assert len(r.torch["first"]) >= 6 and r.torch["off"] is False
    assert len(r.torch["second"]) == 7, r.torch["second"]  # its own max_entries
    # and the snapshot reads the program's history: the kept line is named
    ours = our_groups(r.device("exit")["tensors"])
    assert ("tm_user_history.py", line_of("tm_user_history.py", "KEEP")) in ours, ours


def test_the_exit_reading_imports_nothing_the_program_did_not(scenario):
    # the fixture compares stdout: the bare run prints both False
    r = scenario("tm_trivial_exit.py")
    assert r.torch == {"torch._inductor": False, "torch._dynamo": False}, r.torch
    ours = our_groups(r.device("exit")["tensors"])
    assert ("tm_trivial_exit.py", line_of("tm_trivial_exit.py", "KEEP")) in ours, ours


def test_a_leak_is_named_by_its_line_with_its_growth_a_step(scenario):
    r = scenario("tm_leak_growth.py")
    d = r.device("exit")
    ours = our_groups(d["tensors"])
    assert ours == torch_groups(r), (ours, torch_groups(r))
    logits = line_of("tm_leak_growth.py", "LOGITS")
    assert ours[("tm_leak_growth.py", logits)] == [8 * r.torch["logits"], 8], ours
    [g] = d["growth"]
    assert (g["site"]["line"], g["site"]["function"]) == (logits, "evaluate"), g
    # read at each step's end: 0 after step 1 (its logits come after), 7 after step 8
    assert (g["first_step"], g["last_step"], g["steps"]) == (1, 8, 7), g
    assert g["bytes_per_step"] == r.torch["logits"], g
    assert g["bytes"] == 8 * r.torch["logits"], g
    assert g["stack"][0]["line"] == logits or g["site"] in g["stack"], g


@pytest.mark.parametrize("env", [{}, {"CUMEMTRACE_TORCH_PEAK": "0"}], ids=["default", "no-peak"])
def test_the_step_end_reading_runs_no_memory_stats(scenario, env):
    # the fixture compares stdout: bare the program counts 0 calls
    r = scenario("step_reading_cost.py", env=env)
    assert r.torch == {"memory_stats_calls": 0, "steps": 20}, r.torch
    assert r.device("exit")["tensors"] is not None


def test_without_history_the_step_end_reads_no_counters(scenario):
    # nothing to read at a step's end: not even PyTorch's raw counters
    r = scenario("step_reading_cost.py", "raw", env={"CUMEMTRACE_TORCH_HISTORY": "0"})
    assert r.torch == {"memory_stats_calls": 0, "steps": 20}, r.torch


def test_memory_that_stands_still_is_not_read_every_step(scenario):
    # 20 steps whose memory stops growing after the first: the counters are
    # read at steps 1, 2, 3 (its optimizer state may still grow), then 4 or
    # 5, 9, 17 - never once a step
    r = scenario("step_reading_cost.py", "steady")
    [reads] = [int(l.split()[1]) for l in r.stderr.splitlines() if l.startswith("RAW_READS ")]
    assert 1 <= reads <= 8, reads
    assert r.device("exit")["tensors"] is not None


def test_the_step_hooks_raise_few_audit_events(scenario):
    # a host's own audit hook sees what our step hooks do; ten steps
    r = scenario("step_audit_events.py")
    [line] = [l for l in r.stderr.splitlines() if l.startswith("AUDIT ")]
    seen = json.loads(line.split(" ", 1)[1])
    ours = sum(seen.get(e, 0) for e in ("ctypes.cdata", "sys._getframe", "object.__getattr__"))
    print("audit events of ours in ten steps:", ours, seen)
    # 30 measured: a sys._getframe and two ctypes.cdata a step (the step
    # wrapper's frame mapped as two structs); 100 when its words were read
    # one by one and its code looked up every step, 350 when read whole
    assert ours <= 33, seen


def test_no_growth_without_a_leak(scenario):
    r = scenario("tensors_params.py")
    assert r.device("exit")["growth"] == [], r.device("exit")["growth"]


def test_the_peaks_tensors_of_fp32_against_checkpointing(scenario):
    # by default: no setting asks for them
    peaks = {}
    for mode in ("fp32", "ckpt"):
        r = scenario("tm_peak.py", mode)
        p = r.device("exit")["peak_tensors"]
        assert p is not None, mode
        assert p["allocated_bytes"] == r.torch["max_allocated"], (mode, p["allocated_bytes"])
        on_our_clock(r, p)
        peaks[mode] = our_groups(p)
    act = ("tm_peak.py", line_of("tm_peak.py", "ACT"))
    act2 = ("tm_peak.py", line_of("tm_peak.py", "ACT2"))
    weight = ("tm_peak.py", line_of("tm_peak.py", "PARAMS"))
    # fp32 keeps both activations of (nearly) every block at its peak,
    # 4 MiB each: backward has begun to free the last block's
    assert peaks["fp32"][act][0] >= 6 * 4 * N and peaks["fp32"][act2][0] >= 6 * 4 * N, \
        peaks["fp32"]
    assert peaks["fp32"][weight] == [8 * 4 * N, 8], peaks["fp32"]
    # checkpointing keeps neither for all 8 blocks: the activations that went
    fp32_acts = peaks["fp32"][act][0] + peaks["fp32"].get(act2, [0])[0]
    ckpt_acts = peaks["ckpt"].get(act, [0])[0] + peaks["ckpt"].get(act2, [0])[0]
    assert ckpt_acts < fp32_acts / 2, (peaks["fp32"], peaks["ckpt"])
    assert sum(b for b, _ in peaks["ckpt"].values()) < sum(b for b, _ in peaks["fp32"].values())
    assert peaks["ckpt"][weight] == [8 * 4 * N, 8], peaks["ckpt"]




def test_no_peak_tensors_when_turned_off(scenario):
    r = scenario("tm_peak.py", "fp32", env={"CUMEMTRACE_TORCH_PEAK": "0"})
    assert r.device("exit")["peak_tensors"] is None
    assert r.device("exit")["tensors"] is not None


def on_our_clock(r, p):
    """The peak's time_ns on the snapshots' clock: after the library loaded,
    before the exit dump, and PyTorch's own time of it (Unix) less the
    library's start (Unix) within a millisecond."""
    proc = r.only("exit")["process"]
    assert 0 < p["time_ns"] < proc["dump_time_ns"], (p["time_ns"], proc)
    assert abs(p["time_unix_us"] * 1000 - proc["start_wall_ns"] - p["time_ns"]) < 1000000, p


def peak_against_pytorch(r, marker):
    """The exit snapshot's peak_tensors against PyTorch's own snapshot taken
    by the scenario at the peak's moment (tm_peak_old.py)."""
    p = r.device("exit")["peak_tensors"]
    assert p is not None, r.stderr
    assert p["allocated_bytes"] == r.torch["max_allocated"], p["allocated_bytes"]
    on_our_clock(r, p)
    ours, theirs = our_groups(p), torch_groups(r, "peak_snapshot.pickle")
    assert ours == theirs, (ours, theirs)
    assert ours[("tm_peak_old.py", line_of("tm_peak_old.py", marker))] == [64 * MiB, 1], ours
    return p


SHORT_TRACE = {"CUMEMTRACE_TORCH_PEAK_ENTRIES": "128"}  # a few steps' events


def test_a_peak_older_than_the_trace_is_kept_from_its_step_end(scenario):
    r = scenario("tm_peak_old.py", "old", env=SHORT_TRACE)
    p = peak_against_pytorch(r, "BIG")
    assert p["step"] == 1, p["step"]
    # placed on the timeline: before the reading at step 1's end
    first = r.device("exit")["tensor_series"]["readings"][0]
    assert first["step"] == 1 and 0 < p["time_ns"] < first["time_ns"], (p, first)
    # the timeline's tensor track has the peak's sample there, with its bytes
    tl = json.loads(cli("timeline", "--format", "chrome", r.files[0], check=True).stdout)
    ev = tl["traceEvents"] if isinstance(tl, dict) else tl
    at = [e for e in ev if e.get("name") == "device 0 tensors by line"
          and round(e["ts"] * 1000) == p["time_ns"]]
    assert len(at) == 1, [e for e in ev if "tensors by line" in str(e.get("name"))]
    assert sum(v for v in at[0]["args"].values()) == p["allocated_bytes"], at
    # and report's at-peak heading says when
    out = cli("report", r.files[0], check=True).stdout
    m = re.search(r"At the peak \(([\d.]+) s, step 1\)", out)
    assert m and abs(float(m.group(1)) - p["time_ns"] / 1e9) < 0.01, out


def test_a_peak_kept_from_its_step_end_names_its_gradients_as_the_dump_does(scenario):
    """The reading kept at step 1's end is the exit's peak_tensors: the
    parameters' gradients live at the peak (made in backward, no frames) are
    the group the dump's tensors name "AccumulateGrad" too, with PyTorch's
    own sizes of those blocks at the peak."""
    r = scenario("tm_peak_old.py", "old", env=SHORT_TRACE)
    p = peak_against_pytorch(r, "BIG")
    grads = json.loads((r.files[0].parent / "peak_grads.json").read_text())
    snap = pickle.loads((r.files[0].parent / "peak_snapshot.pickle").read_bytes())
    sizes = {b["address"]: b["size"] for seg in snap["segments"] if seg["device"] == 0
             for b in seg["blocks"] if b["state"] == "active_allocated"}
    assert all(a in sizes for a in grads), (grads, sizes)
    named = [g for g in p["groups"] if g["origin"] is not None]
    assert len(named) == 1, p["groups"]
    assert named[0]["origin"] == {"thread": "backward", "node": "AccumulateGrad",
                                  "forward_site": None}, named
    assert (named[0]["bytes"], named[0]["count"]) == \
        (sum(sizes[a] for a in grads), len(grads)), (named, grads, sizes)
    [now] = [g for g in r.device("exit")["tensors"]["groups"] if g["origin"] is not None]
    assert now["origin"] == named[0]["origin"], now


def test_reset_peak_memory_stats_drops_the_kept_reading(scenario):
    r = scenario("tm_peak_old.py", "reset", env=SHORT_TRACE)
    # the same bytes at both peaks: only the reset tells them apart
    assert r.torch["first_max"] == r.torch["max_allocated"], r.torch
    p = peak_against_pytorch(r, "OTHER")
    assert ("tm_peak_old.py", line_of("tm_peak_old.py", "BIG")) not in our_groups(p)
    assert p["step"] == 2, p["step"]


def test_a_reading_is_never_carried_into_a_later_dump(scenario):
    r = scenario("tm_history_off.py")
    api = next(s for s in r.snapshots if s["reason"] == "api")["devices"][0]
    keep = ("tm_history_off.py", line_of("tm_history_off.py", "KEEP"))
    assert keep in our_groups(api["tensors"]), api["tensors"]
    assert r.device("exit")["tensors"] is None, r.device("exit")["tensors"]


def test_the_programs_own_snapshot_sees_our_history_as_documented(scenario):
    """docs/pytorch.md, "The program's own snapshot": the layer's history is
    PyTorch's, so a program's own _snapshot() under the tracer shows each
    block's stack and the layer's trace of events, where bare it shows
    neither; a history the program records itself is added to that trace
    (PyTorch keeps the earlier entries), not started afresh."""
    r = scenario("tm_host_snapshot.py")
    bare = json.loads((r.files[0].parent.parent / "bare" / "host_view.json").read_text())
    traced = json.loads((r.files[0].parent / "host_view.json").read_text())
    assert bare["first"] == {"blocks": 1, "blocks_with_frames": 0, "trace": 0,
                             "allocated": 4 * MiB}, bare
    assert traced["first"]["blocks_with_frames"] == 1 and traced["first"]["trace"] > 0, traced
    # the same blocks and bytes: only the stacks and the trace differ
    for k in ("blocks", "allocated"):
        assert traced["first"][k] == bare["first"][k] and traced["own"][k] == bare["own"][k]
    assert bare["own"]["blocks_with_frames"] == 1, bare
    assert traced["own"]["blocks_with_frames"] == 2, traced
    assert traced["own"]["trace"] > bare["own"]["trace"], (bare, traced)
