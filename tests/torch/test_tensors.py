"""Who holds it, in tensors.  Each scenario takes PyTorch's own
snapshot (torch.cuda.memory._dump_snapshot, scenarios/truth.py) where our
report speaks (at exit, in the OutOfMemoryError handler); the test groups
PyTorch's live blocks by the scenario's line that allocated them and puts
that side by side with `cumemtrace report --json`'s `tensors`: the same
lines with the same bytes.  PyTorch's allocation history is on by default
under the tracer (CUMEMTRACE_TORCH_HISTORY=0 turns it off)."""
import collections
import json
import pickle
import re
import subprocess

from conftest import CLI, MiB, line_of


def report_json(path):
    r = subprocess.run([str(CLI), "report", "--json", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["snapshots"][0]


def report_text(path, *flags):
    r = subprocess.run([str(CLI), "report", *flags, str(path)], capture_output=True, text=True,
                       timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    return " ".join(r.stdout.split())


def snapshot_file(run, reason):
    [f] = [f for f, s in zip(run.files, run.snapshots) if s["reason"] == reason]
    return f


def torch_by_line(run, script):
    """PyTorch's live tensors on device 0 grouped by the innermost frame in
    `script`: {line or None (no Python stack): [bytes, count]}."""
    snap = pickle.loads((run.files[0].parent / "torch_snapshot.pickle").read_bytes())
    out = collections.defaultdict(lambda: [0, 0])
    for seg in snap["segments"]:
        if seg["device"] != 0:
            continue
        for b in seg["blocks"]:
            if b["state"] != "active_allocated":
                continue
            line = next((f["line"] for f in b.get("frames") or []
                         if f["filename"].endswith("/" + script)), None)
            out[line][0] += b["size"]
            out[line][1] += 1
    return dict(out)


def ours_by_line(tensors, script):
    """report --json's tensors grouped the same way."""
    out = collections.defaultdict(lambda: [0, 0])
    for t in tensors:
        line = None
        for frame in t["site"].split(" < ") if t["site"] else []:
            name, ln, _ = frame.rsplit(":", 2) if frame.count(":") >= 2 else (frame, 0, 0)
            if name == script:
                line = int(ln)
                break
        out[line][0] += t["bytes"]
        out[line][1] += t["count"]
    return dict(out)


def side_by_side(run, script, tensors):
    """Our lines are PyTorch's largest, with PyTorch's bytes and counts."""
    theirs = torch_by_line(run, script)
    ours = ours_by_line(tensors, script)
    assert ours, f"no tensors in our report: {tensors}"
    largest = dict(sorted(theirs.items(), key=lambda kv: -kv[1][0])[:len(ours)])
    assert ours == largest, (ours, theirs)
    return ours, theirs


def test_leak_across_steps_names_the_kept_clones(scenario):
    r = scenario("tensors_leak.py")
    path = snapshot_file(r, "exit")
    rep = report_json(path)
    ours, theirs = side_by_side(r, "tensors_leak.py", rep["devices"][0]["tensors"])
    leak, inp = line_of("tensors_leak.py", "LEAK"), line_of("tensors_leak.py", "INPUT")
    assert ours[leak] == [768 * MiB, 6] and ours[inp] == [128 * MiB, 1], ours
    assert sum(b for b, _ in theirs.values()) == r.torch["allocated"]
    text = report_text(path)
    # The tensors are what is live; the segments are `report --segments`.
    at = text.index("Live at exit (possible leaks): ")
    assert re.search(rf"768 MiB [\d.]+% 6 tensors_leak\.py:{leak}:step "
                     r"< tensors_leak\.py:", text[at:]), text
    assert "cached segments, by the line that created them" not in text, text
    assert "by the line that created them" in report_text(path, "--segments")


def test_max_memory_allocated_beside_the_peak(scenario):
    r = scenario("tensors_leak.py")
    path = snapshot_file(r, "exit")
    snap = next(s for s in r.snapshots if s["reason"] == "exit")
    peak = r.torch["max_allocated"]
    assert snap["devices"][0]["allocator"]["peak_allocated_bytes"] == peak
    exact = subprocess.run([str(CLI), "report", "--bytes", str(path)], capture_output=True,
                           text=True, timeout=60, env={"NO_COLOR": "1"}).stdout
    # the peak's tensors (on by default) total max_memory_allocated
    assert re.search(rf"At the peak \([\d.]+ s\): {peak} B of PyTorch's tensors, by line",
                     exact), exact
    diff = subprocess.run([str(CLI), "diff", "--bytes", str(path), str(path)],
                          capture_output=True, text=True, timeout=60,
                          env={"NO_COLOR": "1"}).stdout
    assert f"tensors' peak (max_memory_allocated) {peak} B -> {peak} B" in diff, diff


def test_parameters_are_named_by_the_users_line(scenario):
    r = scenario("tensors_params.py")
    rep = report_json(snapshot_file(r, "exit"))
    ours, _ = side_by_side(r, "tensors_params.py", rep["devices"][0]["tensors"])
    params = line_of("tensors_params.py", "PARAMS")
    assert ours[params][0] == r.torch["params"], ours
    assert ours[line_of("tensors_params.py", "BUFFER")] == [32 * MiB, 1]
    site = next(t["site"] for t in rep["devices"][0]["tensors"]
                if t["site"].startswith(f"tensors_params.py:{params}:"))
    assert "module.py" not in site, site  # _apply / <lambda> frames are torch's own


def test_backward_oom_shows_the_forward_lines_and_autograds_blocks(scenario):
    r = scenario("tensors_backward_oom.py", memory="1536MiB")
    assert r.torch["raised"]
    rep = report_json(snapshot_file(r, "oom"))
    ours, theirs = side_by_side(r, "tensors_backward_oom.py", rep["oom"]["tensors"])
    for mark in ("WEIGHT", "INPUT", "ACT1"):  # ACT2 is freed by its backward
        assert line_of("tensors_backward_oom.py", mark) in ours, (mark, ours)
    assert None in ours, ours  # what backward made so far: no Python stack
    pm = next(s for s in r.snapshots if s["reason"] == "oom")
    assert sum(b for b, _ in theirs.values()) == pm["oom"]["allocator"]["allocated_bytes"]


def test_transformer_oom_names_the_lines_holding_tensors(scenario):
    r = scenario("tensors_transformer_oom.py", memory="2GiB")
    assert r.torch["raised"]
    path = snapshot_file(r, "oom")
    rep = report_json(path)
    ours, _ = side_by_side(r, "tensors_transformer_oom.py", rep["oom"]["tensors"])
    for mark in ("NORM", "ATTN", "RESIDUAL"):
        assert line_of("tensors_transformer_oom.py", mark) in ours, (mark, ours)
    text = report_text(path)
    assert "Holders at the failure: " in text and "of PyTorch's tensors, by line" in text, text


def test_history_off_names_no_tensors(scenario):
    r = scenario("tensors_leak.py", env={"CUMEMTRACE_TORCH_HISTORY": "0"})
    rep = report_json(snapshot_file(r, "exit"))
    assert rep["devices"][0]["tensors"] is None
    assert "tensors:" not in report_text(snapshot_file(r, "exit"))


def test_diff_names_the_line_whose_tensors_grew(scenario):
    """`diff` of a run that kept 3 clones and one that kept 6 says what grew
    by the line of the live tensors, with PyTorch's own bytes on each side
    (its _dump_snapshot grouped by line); the driver-level tables stay
    behind --segments, named for what they are."""
    three = scenario("tensors_leak.py", "3")
    six = scenario("tensors_leak.py")  # 6, its default: the run the tests above judge
    leak, inp = line_of("tensors_leak.py", "LEAK"), line_of("tensors_leak.py", "INPUT")
    base, new = torch_by_line(three, "tensors_leak.py"), torch_by_line(six, "tensors_leak.py")
    assert (base[leak], new[leak]) == ([384 * MiB, 3], [768 * MiB, 6]), (base, new)
    r = subprocess.run([str(CLI), "diff", "--bytes", str(snapshot_file(three, "exit")),
                        str(snapshot_file(six, "exit"))], capture_output=True, text=True,
                       timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    head = "Live tensors by line (base at exit: "
    assert head in out, out
    table = out[out.index(head):out.index("\n\n", out.index(head))]
    # base B  new B  change B  n -> m  file:line:function
    rows = {}
    for ln in table.splitlines()[2:]:
        c = ln.split()
        if len(c) >= 10 and c[7] == "->" and c[9].startswith("tensors_leak.py:"):
            rows[int(c[9].split(":")[1])] = [int(c[0]), int(c[2]), c[4], int(c[6]), int(c[8])]
    for line in (leak, inp):
        b, n = base[line], new[line]
        if b == n:  # an unchanged line is counted, not listed
            assert line not in rows and "unchanged)" in table, (line, table)
            continue
        assert rows[line] == [b[0], n[0], f"+{n[0] - b[0]}", b[1], n[1]], (line, table)
    # the largest change first: the kept clones' line, not the segments' (line 18's)
    assert table.splitlines()[2].split()[9].startswith(f"tensors_leak.py:{leak}:"), table
    # the driver-level tables stay behind --segments, named for what they are
    seg = subprocess.run([str(CLI), "diff", "--segments", str(snapshot_file(three, "exit")),
                          str(snapshot_file(six, "exit"))], capture_output=True, text=True,
                         timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"}).stdout
    assert "Cached segments at peak, by the line that created them" not in out, out
    assert "Cached segments at peak, by the line that created them" in seg, seg
    assert "Live cached segments, by the line that created them: " in seg, seg
