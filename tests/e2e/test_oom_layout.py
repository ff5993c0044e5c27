"""Driver-level fragmentation: the post-mortem records where this
process's live allocations sat on the device (oom.layout), the largest gaps
between them against the failing request, and the one live allocation whose
free would make room; `report` prints the layout and never advises shrinking
a buffer already freed.  Scenarios: tests/progs/rt_holes.c, rt_oom fragment."""
import copy
import json
import pickle
import subprocess

from conftest import CLI, MiB

CARD = {"SIMCUDA_MEMORY": "256MiB"}


def postmortem(r):
    [f] = [f for f in r.files if ".oom." in f.name]
    return f, json.loads(f.read_text())


def stack_symbols(doc, sid):
    st = {s["id"]: s for s in doc["stacks"]}[sid]
    return [f.get("symbol") for f in st["frames"]]


def report(path):
    return subprocess.run([str(CLI), "report", "--width", "100", str(path)],
                          capture_output=True, text=True, env={"NO_COLOR": "1"})


def check_ranges(lay):
    """The layout's own arithmetic, recomputed here."""
    allocs = lay["allocations"]
    offs = [a["offset"] for a in allocs]
    assert offs == sorted(offs)
    for a, b in zip(allocs, allocs[1:]):
        assert a["offset"] + a["bytes"] <= b["offset"]
    assert allocs[0]["offset"] == 0
    assert allocs[-1]["offset"] + allocs[-1]["bytes"] == lay["span_bytes"]
    assert lay["bytes"] + lay["gap_bytes"] == lay["span_bytes"]
    sizes = [g["bytes"] for g in lay["gaps"]]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] == lay["largest_gap_bytes"]


def test_holes_between_live_allocations(run):
    r = run(["rt_holes"], env=CARD)
    path, pm = postmortem(r)
    o = pm["oom"]
    assert (o["cause"], o["requested_bytes"], o["free_bytes"]) == \
        ("refused_while_free", 12 * MiB, 20 * MiB)
    lay = o["layout"]
    live = sum(g["count"] for g in o["live"])
    assert lay["count"] == live == 109 and len(lay["allocations"]) == 109
    assert lay["bytes"] == o["tracked_bytes"]
    assert lay["span_bytes"] == 256 * MiB
    check_ranges(lay)
    # the three holes the program made, largest first, where it made them
    assert [(g["offset"], g["bytes"]) for g in lay["gaps"]] == \
        [(22 * MiB, 10 * MiB), (8 * MiB, 6 * MiB), (34 * MiB, 4 * MiB)]
    assert (lay["gap_count"], lay["gap_bytes"], lay["gaps_at_least_request"]) == \
        (3, 20 * MiB, 0)
    # every gap is bordered by live allocations that the file lists
    ends = {a["offset"] + a["bytes"] for a in lay["allocations"]}
    starts = {a["offset"] for a in lay["allocations"]}
    for g in lay["gaps"]:
        assert g["offset"] in ends and g["offset"] + g["bytes"] in starts
    # freeing the 2 MiB buffer between the 10 and 4 MiB holes makes room
    best = lay["best_free"]
    assert (best["offset"], best["bytes"], best["hole_bytes"]) == \
        (32 * MiB, 2 * MiB, 16 * MiB)
    assert "small_neighbour" in stack_symbols(pm, best["stack"])

    out = report(path)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    # Information only: a GPU maps scattered pages, so the
    # gaps between addresses claim nothing, and no advice rests on them.
    assert ("layout: this process's 109 allocations span 256 MiB with 3 gaps (20.0 MiB) "
            "between them; the largest: 10.0 MiB, 6.00 MiB and 4.00 MiB (addresses "
            "only: physical pages need not be contiguous)") in text
    assert "small_neighbour" not in text[text.index("Advice"):text.index("Device 0:")]
    assert "fragmentation" not in text.replace("not fragmentation", "")


def test_advice_never_names_a_freed_buffer(run):
    # big_scratch held most of the card at the run's peak, then was freed
    # before the holes were made: it is no lever at the failure.
    r = run(["rt_holes"], env=CARD)
    path, pm = postmortem(r)
    scratch = [s["id"] for s in pm["stacks"] if "big_scratch" in stack_symbols(pm, s["id"])]
    assert scratch, "the scenario must record big_scratch's stack"
    peak = pm["devices"][0]["at_peak"]
    assert any(g["stack"] in scratch and g["bytes"] == 200 * MiB for g in peak)
    lay = pm["oom"]["layout"]
    assert all(a["stack"] not in scratch for a in lay["allocations"])
    assert lay["best_free"]["stack"] not in scratch
    out = report(path).stdout
    advice = out[out.index("\nAdvice\n"):out.index("\nDevice 0:")]
    assert "big_scratch" not in advice
    full = subprocess.run([str(CLI), "report", "--full", str(path)], capture_output=True,
                          text=True, timeout=60).stdout
    assert "big_scratch" in full  # named, but only in the peak's table (--full)


def test_many_allocations_list_the_ones_around_the_largest_gaps(run):
    # 2 MiB blocks over a 2 GiB card, every other one freed: 512 live
    # allocations, 511 gaps of 2 MiB, a 4 MiB request that none fits.
    r = run(["rt_oom", "fragment"], env={"SIMCUDA_MEMORY": "2GiB"})
    frag = [json.loads(f.read_text()) for f in r.files if ".oom." in f.name]
    [pm] = [d for d in frag if d["oom"]["requested_bytes"] == 4 * MiB]
    lay = pm["oom"]["layout"]
    assert (lay["count"], lay["gap_count"], lay["largest_gap_bytes"]) == \
        (512, 511, 2 * MiB)
    assert lay["gaps_at_least_request"] == 0
    assert len(lay["gaps"]) == 16
    # bounded: the first, the last, those around the listed gaps, best_free
    assert 18 <= len(lay["allocations"]) <= 35
    check_ranges(lay)
    ends = {a["offset"] + a["bytes"] for a in lay["allocations"]}
    starts = {a["offset"] for a in lay["allocations"]}
    for g in lay["gaps"]:
        assert g["offset"] in ends and g["offset"] + g["bytes"] in starts
    # freeing any one block joins two 2 MiB gaps into 6 MiB
    assert (lay["best_free"]["bytes"], lay["best_free"]["hole_bytes"]) == (2 * MiB, 6 * MiB)


def test_host_memory_has_no_layout_and_exhaustion_prints_none(run):
    r = run(["rt_oom", "exhaust"], env=CARD)
    path, pm = postmortem(r)
    lay = pm["oom"]["layout"]
    assert (lay["count"], lay["gap_count"]) == (1, 0)  # the one 40 MiB buffer
    assert "layout:" not in report(path).stdout  # not a fragmentation failure


def test_reader_refuses_a_contradictory_layout(run, tmp_path):
    r = run(["rt_holes"], env=CARD)
    _, pm = postmortem(r)
    cases = {
        "layout: bytes + gap_bytes = span_bytes":
            lambda l: l.update(gap_bytes=l["gap_bytes"] + 1),
        "layout: gaps largest first, inside the span":
            lambda l: l["gaps"].reverse(),
        "layout: allocations in address order, inside the span":
            lambda l: l["allocations"].reverse(),
        "layout: gaps_at_least_request counts the gaps >= the request":
            lambda l: l.update(gaps_at_least_request=1),
    }
    for rule, edit in cases.items():
        doc = copy.deepcopy(pm)
        edit(doc["oom"]["layout"])
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(doc))
        out = report(bad)
        assert out.returncode == 2, (rule, out.stdout)
        assert f'breaks the invariant "{rule}"' in out.stderr, out.stderr
    doc = copy.deepcopy(pm)
    doc["oom"]["layout"]["best_free"]["stack"] = 99999
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    out = report(bad)
    assert out.returncode == 2 and "oom.layout.best_free[0] refers to stack 99999" in out.stderr


def test_allocator_segments_land_in_their_own_post_mortem(tmp_path):
    # The PyTorch layer's ctypes path (tests/python/allocator_segments.py):
    # each post-mortem carries the segments tagged with its own facts'
    # num_ooms, never a later OOM's, and none when none were reported.
    from conftest import BUILD, ROOT, base_env
    script = ROOT / "tests" / "python" / "allocator_segments.py"
    r = subprocess.run(["/usr/bin/python3", str(script), str(BUILD),
                        str(ROOT / "src" / "torchboot")], cwd=tmp_path,
                       env=base_env({"SIMCUDA_MEMORY": "256MiB"}), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "reported\n", r.stderr
    pms = sorted(tmp_path.glob("*.oom.*.json"), key=lambda p: p.name)
    docs = {json.loads(p.read_text())["oom"]["requested_bytes"]: json.loads(p.read_text())
            for p in pms}
    assert sorted(docs) == [1 << 40, 2 << 40, 3 << 40, 4 << 40]
    one = docs[1 << 40]["oom"]
    assert one["allocator"]["num_ooms"] == 5
    base = int(one["layout"]["base"], 16)
    addrs = [base + a["offset"] for a in one["layout"]["allocations"]]
    segs = one["layout"]["allocator_segments"]
    assert (segs["count"], segs["blocks"]) == (3, 9)
    assert [int(g["address"], 16) for g in segs["segments"]] == addrs
    assert [g["blocks"] for g in segs["segments"]] == \
        [[[0, 4 * MiB, "allocated"], [4 * MiB, 2 * MiB, "free"],
          [6 * MiB, 2 * MiB, "pending"]]] * 3
    two = docs[2 << 40]["oom"]["layout"]["allocator_segments"]
    assert (two["count"], two["blocks"], two["segments"][0]["address"]) == \
        (1, 1, hex(addrs[1]))
    assert docs[3 << 40]["oom"]["layout"]["allocator_segments"] is None
    many = docs[4 << 40]["oom"]["layout"]["allocator_segments"]
    assert (many["count"], many["blocks"], len(many["segments"])) == (1100, 1100, 1024)
    assert {g["pool"] for g in many["segments"]} == {"small"}
    # the reader accepts them, and refuses a block outside its segment
    for p in pms:
        assert report(p).returncode == 0
    bad = copy.deepcopy(docs[1 << 40])
    bad["oom"]["layout"]["allocator_segments"]["segments"][0]["blocks"][2][1] = 4 * MiB
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    out = report(path)
    assert out.returncode == 2
    assert 'breaks the invariant "layout: blocks in order, inside their segment"' in out.stderr
    # The exit's layout (tag LAYOUT_STATE) is in no post-mortem: the third,
    # rewritten at exit, still has none; the exit snapshot carries it.
    for p in pms:
        assert "train.py" not in p.read_text()
    [ex] = [p for p in tmp_path.glob("cumemtrace.*.json") if ".oom." not in p.name]
    doc = json.loads(ex.read_text())
    st = doc["devices"][0]["allocator_segments"]
    assert (st["count"], st["blocks"]) == (2, 5)
    assert st["stacks"] == [[{"file": "/w/train.py", "line": 12, "function": "step"},
                             {"file": "/w/train.py", "line": 40, "function": "<module>"}],
                            [{"file": '/w/we"ird\\na\tme.py', "line": 3, "function": "f"}]]
    assert [g["blocks"] for g in st["segments"]] == [
        [[0, 4 * MiB, "allocated", 0], [4 * MiB, 4 * MiB, "free"]],
        [[0, 2 * MiB, "allocated", 1], [2 * MiB, 2 * MiB, "allocated", 0],
         [4 * MiB, 4 * MiB, "pending"]]]
    assert [int(g["address"], 16) for g in st["segments"]] == [addrs[0], addrs[2]]
    assert report(ex).returncode == 0
    # memory_viz draws those blocks, with their frames, at their addresses
    pk = tmp_path / "exit.pickle"
    e = subprocess.run([str(CLI), "export", "--format", "memory_viz", str(ex), "-o", str(pk)],
                       capture_output=True, text=True, timeout=60)
    assert e.returncode == 0, e.stderr
    mv = pickle.loads(pk.read_bytes())
    got = [[g["address"], g["total_size"], g["allocated_size"], g["active_size"],
            [[b["address"], b["size"], b["state"],
              [(f["filename"], f["line"], f["name"]) for f in b["frames"]]] for b in g["blocks"]]]
           for g in mv["segments"]]
    a0, a2 = addrs[0], addrs[2]
    train = [("/w/train.py", 12, "step"), ("/w/train.py", 40, "<module>")]
    assert got == [
        [a0, 8 * MiB, 4 * MiB, 4 * MiB, [[a0, 4 * MiB, "active_allocated", train],
                                         [a0 + 4 * MiB, 4 * MiB, "inactive", []]]],
        [a2, 8 * MiB, 4 * MiB, 8 * MiB,
         [[a2, 2 * MiB, "active_allocated", [('/w/we"ird\\na\tme.py', 3, "f")]],
          [a2 + 2 * MiB, 2 * MiB, "active_allocated", train],
          [a2 + 4 * MiB, 4 * MiB, "active_pending_free", []]]]]
    # a block naming a stack the file does not have is refused
    bad = copy.deepcopy(doc)
    bad["devices"][0]["allocator_segments"]["segments"][0]["blocks"][0][3] = 2
    path.write_text(json.dumps(bad))
    out = report(path)
    assert out.returncode == 2
    assert 'breaks the invariant "layout: a block\'s stack is one of stacks"' in out.stderr
