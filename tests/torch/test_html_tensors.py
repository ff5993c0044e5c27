"""The HTML page's flame graph, site table and timeline, and the Chrome
timeline's series by line, in PyTorch's tensors, on real PyTorch on the
simulated GPU: each is put side by side
with PyTorch's own torch.cuda.memory._snapshot() (truth.py) grouped by the
first frame in the user's own code (test_tensor_views.py's grouping) and
must find the same lines with the same bytes - the eval pass's kept
logits at the eval line, not at the training forward whose segments they
sit in.  --segments gives the driver's view back."""
import collections
import json
import os

import pytest

from conftest import MiB, cli, line_of
from test_tensor_views import (CACHE, cli_text, file_of, folded_by_user_line, frame_file_line,
                               torch_by_user_line, user_key, without_cache)

DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def page_model(page):
    text = page.read_text()
    start = text.index('<script type="application/json" id="cmt-data">') + 46
    return json.loads(text[start:text.index("</script>", start)])


def label_key(label):
    """A site table label ("file.py:38:eval_step", a holder's display) as
    torch_by_user_line keys it; the cache as CACHE."""
    if label == CACHE:
        return CACHE
    p = frame_file_line(label)
    return (os.path.basename(p[0]), p[1]) if p else None


def stack_names(model, f, st):
    """The frame names of the page's stack st, innermost first."""
    w, off = f["frame_width"], sum(f["stack_len"][:st])
    out = []
    for k in range(off, off + f["stack_len"][st]):
        v = 0
        for c in f["stack_frames"][k * w:(k + 1) * w]:
            v = v * 64 + DIGITS.index(c)
        out.append(model["frames"][v][2])
    return out


def flame_by_user_line(model, f, mode):
    """The page's flame graph rows of `mode` grouped as torch_by_user_line."""
    out = collections.Counter()
    for d in f["devices"]:
        for st, b, _ in d["groups"][mode]:
            names = stack_names(model, f, st)
            if names[-1] == CACHE:
                out[CACHE] += b
                continue
            out[user_key(p for p in map(frame_file_line, names) if p)] += b
    return dict(out)


def test_the_page_draws_the_eval_leak_at_the_eval_line_with_pytorchs_bytes(scenario, tmp_path):
    r = scenario("tensors_eval_leak.py", memory="8GiB")
    theirs = torch_by_user_line(r)
    exitf = file_of(r, "exit")
    out = tmp_path / "page.html"
    cli_text("html", "-o", out, exitf)
    model = page_model(out)
    [f] = model["files"]
    assert f["tensor_model"]
    # the flame graph: as PyTorch's snapshot and as `flamegraph --at live`
    [dev] = f["devices"]
    assert dev["groups_tensors"]["live"]
    flame = flame_by_user_line(model, f, "live")
    assert without_cache(flame) == theirs, (flame, theirs)
    assert flame == folded_by_user_line(cli_text("flamegraph", "--at", "live", exitf))
    assert sum(flame.values()) == r.torch["reserved"]
    # the site table's lines
    sites = collections.Counter()
    for i, li in enumerate(f["sites"]["label"]):
        sites[label_key(f["labels"][li])] += f["sites"]["live"][i]
    sites = {k: v for k, v in sites.items() if v}
    assert without_cache(sites) == theirs, (sites, theirs)
    evl = line_of("tensors_eval_leak.py", "EVAL")
    train = line_of("tensors_eval_leak.py", "TRAIN")
    assert sites[("tensors_eval_leak.py", evl)] == 4 * 32 * MiB, sites
    assert ("tensors_eval_leak.py", train) not in sites, sites
    # the timeline's bands: at the dump each holds its line's bytes; a band
    # with no user line (the bands come from the peak's groups, where the
    # blocks with no frames are one group) what the dump's own groups of
    # that name hold (there the gradients are AccumulateGrad's)
    assert dev["bands"], dev
    last = dev["points"][-1]
    own = collections.Counter()
    for g in json.loads(exitf.read_text())["devices"][0]["tensors"]["groups"]:
        if g["site"] is None and g["origin"] is None:
            own["[no user frame]"] += g["bytes"]
    for b, pos in enumerate(dev["bands"]):
        label = f["labels"][f["sites"]["label"][pos]]
        key = label_key(label)
        want = theirs.get(key, 0) if key is not None else own[label]
        assert last[2 + b] == want, (label, last, theirs)
    assert ("tensors_eval_leak.py", evl) in \
        [label_key(f["labels"][f["sites"]["label"][pos]]) for pos in dev["bands"]]
    # diff --html of the two api dumps: both drawn in the tensor model, so
    # the differential graph matches the eval line across them (+2 steps'
    # logits)
    d2, d4 = (exitf.parent / f"cumemtrace.step{n}.json" for n in (2, 4))
    dpage = tmp_path / "diff.html"
    d = cli("diff", "--html", dpage, d2, d4)
    assert d.returncode in (0, 1), d.stderr  # 1: the gate saw growth
    dmodel = page_model(dpage)
    base, new = (flame_by_user_line(dmodel, g, "live") for g in dmodel["files"])
    assert all(g["tensor_model"] for g in dmodel["files"])
    key = ("tensors_eval_leak.py", evl)
    assert new[key] - base[key] == 2 * 32 * MiB, (base, new)
    # --segments: the driver's view, where the training forward's line holds
    # the segments the kept logits sit in
    seg = tmp_path / "segments.html"
    cli_text("html", "--segments", "-o", seg, exitf)
    [g] = page_model(seg)["files"]
    assert not g["tensor_model"]
    held = {g["labels"][li]: g["sites"]["live"][i] for i, li in enumerate(g["sites"]["label"])}
    assert any(k.startswith(f"tensors_eval_leak.py:{train}:") and v > 0
               for k, v in held.items()), held


def tensor_samples(path):
    """The Chrome trace's samples of device 0's tensors by line: [(ts, args)]."""
    doc = json.loads(cli_text("timeline", "--format", "chrome", path))
    return [(e["ts"], e["args"]) for e in doc["traceEvents"]
            if e.get("name") == "device 0 tensors by line"]


def test_the_timelines_draw_a_series_per_line_over_the_run(scenario, tmp_path):
    """The PyTorch layer's readings at the optimizer steps' ends go into the
    snapshot (tensor_series) and both timelines draw them as a series per
    line: at step k's end the eval line holds the k - 1 logits kept so far,
    and at the dump every line holds what PyTorch's own snapshot says."""
    r = scenario("tensors_eval_leak.py", memory="8GiB")
    theirs = torch_by_user_line(r)
    exitf = file_of(r, "exit")
    series = json.loads(exitf.read_text())["devices"][0]["tensor_series"]
    steps = [x["step"] for x in series["readings"]]
    assert steps == [1, 2, 3, 4], series
    evl = line_of("tensors_eval_leak.py", "EVAL")
    name = f"tensors_eval_leak.py:{evl}:eval_step"
    samples = tensor_samples(exitf)
    # the readings, the peak's (placed at its moment), then the dump
    assert len(samples) == len(steps) + 2, samples
    peak = json.loads(exitf.read_text())["devices"][0]["peak_tensors"]
    [at_peak] = [a for ts, a in samples if round(ts * 1000) == peak["time_ns"]]
    assert sum(v for k, v in at_peak.items() if k != "PyTorch's cache") == \
        peak["allocated_bytes"], (at_peak, peak)
    samples = [(ts, a) for ts, a in samples if round(ts * 1000) != peak["time_ns"]]
    assert [a[name] for _, a in samples[:-1]] == [(k - 1) * 32 * MiB for k in steps], samples
    assert [ts * 1000 for ts, _ in samples[:-1]] == \
        [pytest.approx(x["time_ns"], abs=1) for x in series["readings"]]
    for (_, a), x in zip(samples, series["readings"]):
        assert sum(a.values()) == x["reserved_bytes"], (a, x)
    last = samples[-1][1]
    lines = {label_key(k): v for k, v in last.items() if k not in ("other lines", "PyTorch's cache")}
    assert {k: v for k, v in lines.items() if v} == \
        {k: v for k, v in theirs.items() if k in lines and v}, (lines, theirs)
    assert sum(last.values()) == r.torch["reserved"]
    # the page's timeline: the eval line's band at each reading
    out = tmp_path / "page.html"
    cli_text("html", "-o", out, exitf)
    [f] = page_model(out)["files"]
    [dev] = f["devices"]
    [b] = [b for b, pos in enumerate(dev["bands"])
           if f["labels"][f["sites"]["label"][pos]] == name]
    at = {p[0]: p[2 + b] for p in dev["points"]}
    assert [at[x["time_ns"]] for x in series["readings"]] == [(k - 1) * 32 * MiB for k in steps]
