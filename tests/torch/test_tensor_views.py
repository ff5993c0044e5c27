"""The views beside `report` in PyTorch's tensors - flamegraph, export
(speedscope), diff - on real PyTorch on the simulated GPU.  Each is put
side by side with PyTorch's own torch.cuda.memory._snapshot() (truth.py:
torch_snapshot.pickle, taken where our dump speaks) grouped by the first
frame in the user's own code - here, the innermost frame in the scenarios'
folder - and must find the same lines with the same bytes: the lines that
hold the tensors, not the lines that first created each cached segment."""
import collections
import json
import os
import pickle

import pytest

from conftest import MiB, SCENARIOS, cli, line_of

CACHE = "[PyTorch's cache]"


def cli_text(*args):
    """The CLI's output, 200 columns wide; it must succeed."""
    return cli(*args, env={"COLUMNS": "200"}, check=True).stdout


def file_of(run, reason):
    [f] = [f for f, s in zip(run.files, run.snapshots) if s["reason"] == reason]
    return f


def user_key(files_lines):
    """(basename, line) of the innermost frame in the scenarios' folder, from
    (file, line) pairs innermost first; None when no frame is the user's."""
    for file, line in files_lines:
        if os.path.dirname(file) == str(SCENARIOS):
            return os.path.basename(file), int(line)
    return None


def torch_by_user_line(run):
    """PyTorch's live blocks on device 0: {user key: bytes}."""
    snap = pickle.loads((run.files[0].parent / "torch_snapshot.pickle").read_bytes())
    out = collections.Counter()
    for seg in snap["segments"]:
        if seg["device"] != 0:
            continue
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                key = user_key((f["filename"], f["line"]) for f in b.get("frames") or [])
                out[key] += b["size"]
    return dict(out)


def frame_file_line(frame):
    """A folded frame "file:line:function" -> (file, line), or None."""
    parts = frame.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        return parts[0], int(parts[1])
    return None


def folded_by_user_line(text):
    """flamegraph's folded lines (root first) grouped as torch_by_user_line;
    PyTorch's cache under CACHE."""
    out = collections.Counter()
    for ln in text.splitlines():
        stack, n = ln.rsplit(" ", 1)
        frames = stack.split(";")
        if frames[-1].startswith(CACHE):
            out[CACHE] += int(n)
            continue
        pairs = [p for p in map(frame_file_line, reversed(frames)) if p]
        out[user_key(pairs)] += int(n)
    return dict(out)


def speedscope_by_user_line(doc, name):
    """The speedscope profile `name` grouped as torch_by_user_line."""
    frames = doc["shared"]["frames"]
    [p] = [p for p in doc["profiles"] if p["name"] == name]
    out = collections.Counter()
    for sample, w in zip(p["samples"], p["weights"]):
        names = [frames[i]["name"] for i in sample]
        if names[-1].startswith(CACHE):
            out[CACHE] += w
            continue
        out[user_key(p for p in map(frame_file_line, reversed(names)) if p)] += w
    return dict(out)


def without_cache(d):
    return {k: v for k, v in d.items() if k != CACHE}


def test_eval_leak_is_named_by_the_eval_line_in_the_flamegraph(scenario):
    """The eval pass's kept logits sit in segments the training step made:
    the flame graph of what is live names the eval line, with PyTorch's
    bytes, and the training line holds nothing."""
    r = scenario("tensors_eval_leak.py", memory="8GiB")
    theirs = torch_by_user_line(r)
    ours = folded_by_user_line(cli_text("flamegraph", "--at", "live", file_of(r, "exit")))
    assert without_cache(ours) == theirs, (ours, theirs)
    evl, train = line_of("tensors_eval_leak.py", "EVAL"), line_of("tensors_eval_leak.py", "TRAIN")
    assert ours[("tensors_eval_leak.py", evl)] == 4 * 32 * MiB, ours
    assert ("tensors_eval_leak.py", train) not in ours, ours
    assert sum(ours.values()) == r.torch["reserved"]
    # The driver's view stays behind the flag: there the training forward's
    # line holds the segments the kept logits sit in.
    seg = folded_by_user_line(cli_text("flamegraph", "--at", "live", "--segments",
                                  file_of(r, "exit")))
    assert seg.get(("tensors_eval_leak.py", train), 0) > 0, seg


def test_eval_leak_in_speedscope_has_the_same_weights(scenario):
    r = scenario("tensors_eval_leak.py", memory="8GiB")
    out = r.files[0].parent / "leak.speedscope.json"
    cli_text("export", "--format", "speedscope", "-o", out, file_of(r, "exit"))
    doc = json.loads(out.read_text())
    ours = speedscope_by_user_line(doc, "device 0 live at dump")
    assert without_cache(ours) == torch_by_user_line(r), ours
    fg = folded_by_user_line(cli_text("flamegraph", "--at", "live", file_of(r, "exit")))
    assert ours == fg


def test_diff_of_two_dumps_names_the_leak_and_its_growth(scenario):
    """Two api dumps of one run, after steps 2 and 4: named by their reason,
    and the eval line's tensors grew by two steps' logits (and their
    graphs' saved outputs), at 32 MiB a step."""
    r = scenario("tensors_eval_leak.py", memory="8GiB")
    d2, d4 = (r.files[0].parent / f"cumemtrace.step{n}.json" for n in (2, 4))
    out = " ".join(cli_text("diff", "--bytes", d2, d4).split())
    assert "base at its api dump" in out and "new at its api dump" in out, out
    assert "at exit" not in out, out
    evl = line_of("tensors_eval_leak.py", "EVAL")
    assert f"+{32 * MiB} B a step at tensors_eval_leak.py:{evl}:eval_step" in out, out


def test_backward_oom_flamegraph_has_pytorchs_lines(scenario):
    r = scenario("tensors_backward_oom.py", memory="1536MiB")
    assert r.torch["raised"]
    ours = folded_by_user_line(cli_text("flamegraph", "--at", "oom", file_of(r, "oom")))
    theirs = torch_by_user_line(r)
    assert without_cache(ours) == theirs, (ours, theirs)


def test_gpt2_forward_oom_flamegraph_has_pytorchs_lines(scenario):
    r = scenario("tensors_gpt2_oom.py", memory="3GiB")
    assert r.torch["raised"]
    ours = folded_by_user_line(cli_text("flamegraph", "--at", "oom", file_of(r, "oom")))
    theirs = torch_by_user_line(r)
    assert without_cache(ours) == theirs, (ours, theirs)
    fwd = ("tensors_gpt2_oom.py", line_of("tensors_gpt2_oom.py", "FORWARD"))
    assert ours[fwd] == max(theirs.values()), ours
    # whole stacks: transformers' frames lie between the user's line and the leaf
    text = cli_text("flamegraph", "--at", "oom", file_of(r, "oom"))
    assert any("modeling_gpt2.py:" in ln and f":{fwd[1]}:" in ln for ln in text.splitlines())


def test_checkpointing_diff_names_the_activations_that_went(scenario):
    """fp32 against gradient checkpointing: the peaks' tensors equal each
    run's max_memory_allocated, and the block's activation lines (ACT,
    ACT2) hold less at the checkpointed run's peak - the activations that
    went are named."""
    # by default: PyTorch's trace replayed, no setting asks for it; the
    # runs are test_tensor_model.py's (the peak's tensors of each)
    plain = scenario("tm_peak.py", "fp32")
    ckpt = scenario("tm_peak.py", "ckpt")
    for r in (plain, ckpt):
        p = r.device()["peak_tensors"]
        assert p is not None and p["allocated_bytes"] == r.torch["max_allocated"], r.stderr
    out = cli_text("diff", "--bytes", "--full", file_of(plain, "exit"), file_of(ckpt, "exit"))
    head = "The peak's tensors by line"
    assert head in out, out
    table = out[out.index(head):out.index("\n\n", out.index(head))]
    assert f"{plain.torch['max_allocated']} B -> {ckpt.torch['max_allocated']} B" in \
        " ".join(table.split()), table
    # base B  new B  change B  n -> m  file:line:function [(gone)]
    rows = {}
    for ln in table.splitlines()[2:]:
        c = ln.split()
        if len(c) >= 10 and c[7] == "->" and c[9].startswith("tm_peak.py:"):
            rows[int(c[9].split(":")[1])] = (int(c[0]) if c[0] != "-" else 0,
                                             int(c[2]) if c[2] != "-" else 0)
    for mark in ("ACT", "ACT2"):
        b, n = rows[line_of("tm_peak.py", mark)]
        assert b > n, (mark, table)
