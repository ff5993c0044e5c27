"""Who holds it, side by side with PyTorch (the tensor model): PyTorch's own
snapshot (torch.cuda.memory._dump_snapshot, scenarios/truth.py, taken where
our report speaks: at exit, or from PyTorch's out-of-memory observer)
grouped by the first frame in the scenario's own code, against `cumemtrace
report --json`'s holders and the text report's rows - the same lines, the
same bytes, every line; autograd's blocks named by their node; the growth
by line of a leak across eval steps; the advice's figures equal to the rows
printed beside them; --segments gives the driver's view back."""
import collections
import json
import pickle
import re

from conftest import MiB, SCENARIOS, cli, line_of


def cli_text(*args):
    """The CLI's output, 200 columns wide; it must succeed."""
    return cli(*args, env={"COLUMNS": "200"}, check=True).stdout


def snapshot_file(run, reason):
    [f] = [f for f, s in zip(run.files, run.snapshots) if s["reason"] == reason]
    return f


def site_of(frames):
    """The group key: the first frame in the user's own code (here, the
    scenarios' directory), as file:line:function; None when none is."""
    for f in frames or []:
        if f["filename"].startswith(str(SCENARIOS) + "/"):
            return f"{f['filename']}:{f['line']}:{f['name']}"
    return None


def torch_groups(run, device=0):
    """PyTorch's live blocks by user line: {line or None: [bytes, count]}."""
    snap = pickle.loads((run.files[0].parent / "torch_snapshot.pickle").read_bytes())
    out = collections.defaultdict(lambda: [0, 0])
    for seg in snap["segments"]:
        if seg["device"] != device:
            continue
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                g = out[site_of(b.get("frames"))]
                g[0] += b["size"]
                g[1] += 1
    return dict(out)


def our_groups(holders):
    assert holders is not None and holders["source"] == "tensors", holders
    assert holders["rest"] is None and holders["more"] is None, holders
    out = collections.defaultdict(lambda: [0, 0])
    for g in holders["groups"]:
        out[g["line"]][0] += g["bytes"]
        out[g["line"]][1] += g["count"]
    return dict(out)


def text_rows(path, *flags):
    """The text report's holder rows (--bytes --full): {display: bytes}
    under each heading of PyTorch's tensors."""
    out = cli_text("report", "--bytes", "--full", *flags, path)
    tables, cur = {}, None
    for line in out.splitlines():
        if "of PyTorch's tensors" in line and line.rstrip().endswith("by line"):
            cur = tables.setdefault(line.split(":")[0].strip(), {})
            continue
        m = re.match(r"\s+(\d+) B\s+[\d.]+%\s+(\d+)\s+(\S.*)$", line)
        if cur is not None and m:
            cur[m.group(3).strip()] = int(m.group(1))
        elif cur is not None and line.strip() and not line.startswith("      ") \
                and "bytes" not in line and not line.lstrip().startswith("<"):
            cur = None
    return out, tables


def display(line):
    return line.rsplit("/", 1)[-1] if line else "[no user frame]"


def test_leak_at_exit_is_every_line_with_pytorchs_bytes_and_its_growth(scenario):
    # the peak's tensors are on by default (PyTorch's trace) for the at-peak table
    r = scenario("tm_leak_growth.py")
    path = snapshot_file(r, "exit")
    rep = json.loads(cli_text("report", "--json", path))["snapshots"][0]
    dev = rep["devices"][0]
    theirs = torch_groups(r)
    ours = our_groups(dev["holders"])
    assert ours == theirs, (ours, theirs)
    assert dev["holders"]["total_bytes"] == r.torch["allocated"]
    logits = f"{SCENARIOS}/tm_leak_growth.py:{line_of('tm_leak_growth.py', 'LOGITS')}:evaluate"
    assert ours[logits] == [8 * r.torch["logits"], 8], ours
    # the text report: the same rows, under "Live at exit (possible leaks)"
    out, tables = text_rows(path)
    live = tables["Live at exit (possible leaks)"]
    assert {k: v for k, v in live.items() if not k.startswith("[")} == \
        {display(k): v[0] for k, v in theirs.items() if k is not None}, (live, out)
    # PyTorch's blocks with no Python stack: the parameters' gradients are
    # AccumulateGrad's, made on autograd's thread; the rest, if any, no line
    rows = {k: v for k, v in live.items() if k.startswith("[")}
    assert sum(rows.values()) == theirs[None][0], (rows, theirs)
    assert rows.get("[autograd's backward thread, AccumulateGrad]") == \
        r.device("exit")["allocator"]["roles"]["gradients"], (rows, out)
    assert "PyTorch's cache: " in out, out
    # the growth: the logits' line, one step's logits a step
    [grow] = dev["growth"]
    assert grow["line"] == logits and grow["bytes_per_step"] == r.torch["logits"], grow
    assert (f"+{r.torch['logits']} B a step at {display(logits)}, steps "
            f"{grow['first_step']}-{grow['last_step']}, {8 * r.torch['logits']} B now") in out, out
    # the peak's tensors: PyTorch's max_memory_allocated to the byte, by line
    snap = next(s for s in r.snapshots if s["reason"] == "exit")
    peak = snap["devices"][0]["allocator"]["peak_allocated_bytes"]
    at_peak = dev["holders_at_peak"]
    assert at_peak["source"] == "tensors" and at_peak["total_bytes"] == peak, at_peak
    assert sum(g["bytes"] for g in at_peak["groups"]) == peak, at_peak
    heads = [k for k in tables if k.startswith("At the peak")]
    assert heads and tables[heads[0]] == {g["display"]: g["bytes"] for g in at_peak["groups"]}
    # --segments: the driver's view, as before
    seg = cli_text("report", "--segments", path)
    assert "of PyTorch's tensors" not in seg, seg
    assert "Cached segments at peak, by the line that created them" in seg, seg


def test_transformer_oom_lists_every_line(scenario):
    r = scenario("tensors_transformer_oom.py", memory="2GiB")
    assert r.torch["raised"]
    path = snapshot_file(r, "oom")
    rep = json.loads(cli_text("report", "--json", path))["snapshots"][0]
    theirs = torch_groups(r)
    ours = our_groups(rep["oom"]["holders"])
    assert ours == theirs, (ours, theirs)
    for mark in ("NORM", "ATTN", "RESIDUAL", "EMBED"):
        n = line_of("tensors_transformer_oom.py", mark)
        assert any(k and k.split(":")[-2] == str(n) for k in ours), (mark, ours)
    out, tables = text_rows(path)
    assert tables["Holders at the failure"] == {display(k): v[0] for k, v in theirs.items()}, out
    # the advice's figures are the rows' own
    adv = " ".join(out.split("Advice")[1].split())
    m = re.search(r"(\d+) lines under forward hold (\d+) B \(([\d.]+)% of PyTorch's tensors; "
                  r"the largest, (\S+), (\d+) B\)", adv)
    if m:
        fwd = [g for g in rep["oom"]["holders"]["groups"]
               if any(f.rsplit(":", 1)[-1] == "forward" for f in g["frames"])]
        assert int(m.group(1)) == len(fwd), (adv, fwd)
        assert int(m.group(2)) == sum(g["bytes"] for g in fwd), adv
        assert (m.group(4), int(m.group(5))) == (fwd[0]["display"], fwd[0]["bytes"]), adv
    else:
        m = re.search(r"At the failure, (\S+) holds [\d.]+% \((\d+) B of PyTorch's (\d+) B", adv)
        assert m, adv
        top = rep["oom"]["holders"]["groups"][0]
        assert (m.group(1), int(m.group(2))) == (top["display"], top["bytes"]), adv


def test_backward_oom_names_autograds_blocks(scenario):
    r = scenario("tensors_backward_oom.py", memory="1536MiB")
    assert r.torch["raised"]
    path = snapshot_file(r, "oom")
    rep = json.loads(cli_text("report", "--json", path))["snapshots"][0]
    theirs = torch_groups(r)
    ours = our_groups(rep["oom"]["holders"])
    assert ours == theirs, (ours, theirs)
    # what backward made so far has no user line: its own row, with
    # autograd's node where the file names it
    out = " ".join(cli_text("report", "--bytes", path).split())
    rows = [g for g in rep["oom"]["holders"]["groups"] if g["line"] is None]
    assert rows and sum(g["bytes"] for g in rows) == theirs[None][0], (rows, theirs)
    for g in rows:
        assert f"{g['bytes']} B" in out and g["display"] in out, (g, out)
        if g["origin"]:
            assert g["display"].startswith(("[backward of ", "[autograd's backward thread")), g


def test_advice_at_the_peak_names_only_the_peaks_tensors(scenario):
    """Without the peak's tensors the advice names no line at the peak - the
    line that created most cached segments (FREED) held none of it - and
    says what is known, with the figures printed beside it (turned off:
    CUMEMTRACE_TORCH_PEAK=0); with them (the default) it names the line
    that held the peak, with the at-peak table's own figures."""
    freed = f"pm_peak_reuse.py:{line_of('pm_peak_reuse.py', 'FREED')}:"
    reused = f"pm_peak_reuse.py:{line_of('pm_peak_reuse.py', 'REUSED')}:"
    r = scenario("pm_peak_reuse.py", env={"CUMEMTRACE_TORCH_PEAK": "0"})
    t = r.torch
    path = snapshot_file(r, "exit")
    dev = r.device()
    assert dev["peak_tensors"] is None
    assert dev["allocator"]["peak_allocated_bytes"] == t["max_allocated"]
    # the driver's segments at the peak: FREED created most of them
    seg = cli_text("report", "--segments", path)
    assert re.search(r"\d+\.\d% +\d+ +" + re.escape(freed), seg), seg
    rep = json.loads(cli_text("report", "--json", path))["snapshots"][0]
    [adv] = [a for a in rep["advice"] if "peak of device 0" in a["text"]]
    assert adv["id"] == "peak-unrecorded", adv
    assert "pm_peak_reuse.py" not in adv["text"], adv
    out = cli_text("report", path)
    text = " ".join(out.split("Advice")[1].split())
    assert "pm_peak_reuse.py" not in text and "holds" not in text, text
    # its figures are the lines printed beside it
    head = re.search(r"Device 0: peak (\S+ \S+) at (\S+ s)", out)
    torch_peak = re.search(r"PyTorch's tensors peaked at (\S+ \S+) \(max_memory_allocated\)",
                           out)
    assert head and torch_peak, out
    assert (f"At the peak of device 0 ({head.group(1)} at {head.group(2)}) the lines that "
            f"held PyTorch's tensors were not recorded; its tensors peaked at "
            f"{torch_peak.group(1)} (max_memory_allocated)") in text, text
    assert "not under CUMEMTRACE_TORCH_PEAK=0" in text, text

    # with the peak's tensors (the default): REUSED, by the at-peak table's own row
    r = scenario("pm_peak_reuse.py")
    path = snapshot_file(r, "exit")
    rep = json.loads(cli_text("report", "--json", path))["snapshots"][0]
    at_peak = rep["devices"][0]["holders_at_peak"]
    assert at_peak["source"] == "tensors", at_peak
    top = at_peak["groups"][0]
    assert top["display"].startswith(reused) and top["bytes"] == 8 * 5 * MiB, at_peak
    assert at_peak["total_bytes"] == r.torch["max_allocated"], at_peak
    out, tables = text_rows(path)
    [head] = [k for k in tables if k.startswith("At the peak")]
    assert tables[head][top["display"]] == top["bytes"], (tables, out)
    text = " ".join(out.split("Advice")[1].split())
    m = re.search(r"At the peak of device 0, (\S+) holds [\d.]+% \((\d+) B of PyTorch's "
                  r"(\d+) B in tensors\)", text)
    assert m, text
    assert (m.group(1), int(m.group(2)), int(m.group(3))) == \
        (top["display"], top["bytes"], at_peak["total_bytes"]), text
    assert freed not in text, text


def rank_rows(out, heading):
    """The rows of `report`'s table over ranks under `heading` (--bytes):
    {line: (total, min, max, ranks)}."""
    assert heading in out, out
    rows = {}
    for line in out.split(heading, 1)[1].splitlines()[1:]:
        if not line.strip():
            break
        m = re.match(r"\s+(\d+) B\s+(\d+) B\s+(\d+) B\s+(\d+)/\d+\s+(\S.*)$", line)
        if m:
            rows[m.group(5).strip()] = tuple(int(x) for x in m.group(1, 2, 3, 4))
    return rows


def summed(per_rank):
    """{display: (total, min, max, ranks)} of per-rank {display: bytes}, a
    rank without a line counting 0 in min."""
    lines = {k for r in per_rank for k in r}
    out = {}
    for k in lines:
        v = [r[k] for r in per_rank if k in r]
        mn = min(v) if len(v) == len(per_rank) else 0
        out[k] = (sum(v), mn, max(v), len(v))
    return out


def test_report_over_ranks_sums_each_ranks_tensor_lines(scenario):
    """`report` over two ranks' files lists PyTorch's tensors by line with
    each rank's own `report` figures - at the peak with the peak's tensors,
    else live in each rank's file - not the lines that created the cached
    segments (FREED); --segments gives the driver's call sites back."""
    freed = f"pm_peak_reuse.py:{line_of('pm_peak_reuse.py', 'FREED')}:"
    for peak in (True, False):
        paths, per_rank = [], []
        for rank, n in ((0, "1"), (1, "3")):
            env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2"}
            if not peak:
                env["CUMEMTRACE_TORCH_PEAK"] = "0"
            r = scenario("pm_peak_reuse.py", n, env=env)
            path = snapshot_file(r, "exit")
            assert r.only("exit")["process"]["rank"] == rank
            dev = json.loads(cli_text("report", "--json", path))["snapshots"][0]["devices"][0]
            h = dev["holders_at_peak" if peak else "holders"]
            assert h["source"] == "tensors", h
            per_rank.append({g["display"]: g["bytes"] for g in h["groups"]})
            paths.append(path)
        out = cli_text("report", "--bytes", *paths)
        heading = ("PyTorch's tensors by line at each rank's peak" if peak else
                   "PyTorch's tensors by line, live in each rank's newest file")
        rows = rank_rows(out, heading)
        assert rows == summed(per_rank), (rows, per_rank, out)
        assert not any(k.startswith(freed) for k in rows), out
        if not peak:
            assert "CUMEMTRACE_TORCH_PEAK=0" in " ".join(out.split()), out
        seg = cli_text("report", "--bytes", "--segments", *paths)
        assert "PyTorch's tensors by line" not in seg.split("detailed below")[0], seg
        assert any(k.startswith(freed) for k in rank_rows(seg, "Call sites at each rank's peak")), seg
