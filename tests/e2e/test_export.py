"""`cumemtrace export`: files other viewers read, checked against their
format's definition and against the snapshot's own numbers."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, CLI, ROOT, base_env
from needs import DEPS, TORCH_VENV, missing, needs

INPUTS = ROOT / "tests" / "golden" / "inputs"
SCHEMA = ROOT / "tests" / "data" / "speedscope-schema.json"
GOOD = sorted(p.name for p in INPUTS.glob("*.json") if not p.name.startswith("bad_"))


def export(fmt, path, out):
    r = subprocess.run([str(CLI), "export", "--format", fmt, str(path), "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("name", GOOD)
def test_speedscope_schema_and_sums(name, tmp_path):
    try:
        import jsonschema
    except ImportError:
        missing("python3-jsonschema", DEPS)
    doc = json.loads(export("speedscope", INPUTS / name, tmp_path / "s.json").read_text())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    snap = json.loads((INPUTS / name).read_text())
    frames = doc["shared"]["frames"]
    by_name = {p["name"]: p for p in doc["profiles"]}
    stacks = {s["id"]: s for s in snap["stacks"]}
    for d in snap["devices"]:
        p = by_name.get(f"device {d['ordinal']} at peak")
        if d.get("peak_tensors"):
            continue  # PyTorch's tensors: test_speedscope_of_pytorchs_tensors
        if d["peak_bytes"] == 0:
            assert p is None
            continue
        # The weights at the peak sum to the device's peak, exactly.
        assert sum(p["weights"]) == d["peak_bytes"] == p["endValue"]
        assert len(p["samples"]) == len(p["weights"])
        # Root first, the entry point last, the stack's frames in between.
        groups = [g for g in d["at_peak"] if g["bytes"]]
        for g, sample in zip(groups, p["samples"]):
            st = stacks.get(g["stack"])
            if st is None:
                continue
            assert frames[sample[-1]]["name"] == st["entry"]
            assert len(sample) == len(st["frames"]) + 1
    if snap.get("oom") and not (snap["oom"].get("allocator") or {}).get("tensors"):
        p = by_name[f"device {snap['oom']['device']} at the OOM"]
        assert sum(p["weights"]) == sum(g["bytes"] for g in snap["oom"]["live"])


def tensor_sum(t):
    return t["allocated_bytes"] + (t["cache"]["bytes"] if t["cache"] else 0)


@pytest.mark.parametrize("name", ["tensors_exit.json", "tensors_oom.json"])
def test_speedscope_of_pytorchs_tensors(name, tmp_path):
    """In a PyTorch process the profiles are PyTorch's tensor groups, as
    flamegraph draws them: each group's whole stack, root first, weighted by
    its bytes, plus the cache - summing to PyTorch's own figures."""
    doc = json.loads(export("speedscope", INPUTS / name, tmp_path / "s.json").read_text())
    snap = json.loads((INPUTS / name).read_text())
    frames = doc["shared"]["frames"]
    by_name = {p["name"]: p for p in doc["profiles"]}
    moments = [(f"device {d['ordinal']} at peak", d["peak_tensors"]) for d in snap["devices"]]
    moments += [(f"device {d['ordinal']} live at dump", d["tensors"]) for d in snap["devices"]]
    if snap.get("oom"):
        moments.append((f"device {snap['oom']['device']} at the OOM",
                        snap["oom"]["allocator"]["tensors"]))
    for pname, t in moments:
        p = by_name[pname]
        assert sum(p["weights"]) == tensor_sum(t) == p["endValue"], pname
        got = {}
        for sample, w in zip(p["samples"], p["weights"]):
            got[";".join(frames[i]["name"] for i in sample)] = w
        for g in t["groups"]:
            if g["stack"]:
                whole = ";".join("%s:%d:%s" % (f["file"], f["line"], f["function"])
                                 for f in reversed(g["stack"]))
                assert got[whole] == g["bytes"], (pname, whole)
        if t["cache"]["bytes"]:
            assert got["[PyTorch's cache]"] == t["cache"]["bytes"]
    seg = json.loads(subprocess.run(
        [str(CLI), "export", "--format", "speedscope", "--segments", str(INPUTS / name)],
        capture_output=True, text=True, timeout=60, check=True).stdout)
    d = snap["devices"][0]
    [p] = [p for p in seg["profiles"] if p["name"] == f"device {d['ordinal']} at peak"]
    assert sum(p["weights"]) == d["peak_bytes"]


def test_export_usage_errors():
    for args, msg in ((["export", str(INPUTS / "exit_train.json")], "needs --format"),
                      (["export", "--format", "svg", str(INPUTS / "exit_train.json")],
                       "--format wants")):
        r = subprocess.run([str(CLI)] + args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and msg in r.stderr and r.stdout == ""


TORCH_PY = os.environ.get("CUMEMTRACE_TORCH_PYTHON",
                          os.path.expanduser("~/.cache/cumemtrace/torch-venv/bin/python"))

# Loads the pickle with PyTorch's own reader functions and prints what the
# test compares with the snapshot.  format_flamegraph is replaced because
# its default downloads flamegraph.pl.
MEMVIZ_CHECK = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
ident = lambda text: text
outs = []
for path in sys.argv[1:]:
    d = pickle.load(open(path, "rb"))
    outs.append({
        "segments_lines": len(mv.segments(d, format_flamegraph=ident).splitlines()),
        "memory_lines": len(mv.memory(d, format_flamegraph=ident).splitlines()),
        "segsum": mv.segsum(d),  # asserts its own accounting adds up
        "trace": mv.trace(d),
        "trace_plot": len(mv.trace_plot(d)),
        "segment_plot": len(mv.segment_plot(d)),
        "actions": [[e["action"], e["addr"], e["size"]] for t in d["device_traces"] for e in t],
        "live": sum(s["total_size"] for s in d["segments"]),
        "active": sum(mv.calc_active(s) for s in d["segments"]),
    })
print(json.dumps(outs))
"""


def memviz_check(paths):
    r = subprocess.run([TORCH_PY, "-c", MEMVIZ_CHECK] + [str(p) for p in paths],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@needs(os.path.exists(TORCH_PY), f"the PyTorch venv's {TORCH_PY}",
       TORCH_VENV + "; CUMEMTRACE_TORCH_PYTHON names another")
def test_memory_viz_reads_with_torch(tmp_path):
    """One PyTorch process (importing torch takes seconds) reads them all."""
    files = [INPUTS / n for n in
             ("oom_exhausted.json", "exit_train.json", "rank1.oom.json", "diff_new.json")]
    # A real post-mortem of the demo's program, with its attempt log.
    run = tmp_path / "run"
    run.mkdir()
    subprocess.run([str(BUILD / "examples" / "train_sim"), "--batch", "64"], cwd=run,
                   env=base_env({"SIMCUDA_MEMORY": "24GiB", "SIMCUDA_RESERVED": "700MiB"}),
                   capture_output=True, timeout=120)
    files += sorted(run.glob("cumemtrace.*.oom.*.json"))
    assert len(files) == 5
    outs = memviz_check([export("memory_viz", f, tmp_path / f"{i}.pickle")
                         for i, f in enumerate(files)])
    for f, out in zip(files, outs):
        check_memviz(json.loads(f.read_text()), out)
    assert any(a[0] == "free_completed" for o in outs for a in o["actions"])
    assert any(a[0] == "oom" for o in outs for a in o["actions"])


def check_memviz(snap, out):
    assert out["trace_plot"] > 0 and out["segment_plot"] > 0 and out["segments_lines"] > 0
    rows = [r for r in snap["events"]["data"] if r[1] >= 0]  # device rows, not host-pinned
    allocs = [a for a in out["actions"] if a[0] == "alloc"]
    assert [a[2] for a in allocs] == [r[3] for r in rows if r[3] > 0]
    # Every free names an earlier allocation of the same size.
    live = {}
    for act, addr, size in out["actions"]:
        if act == "alloc":
            live[addr] = size
        elif act == "free_completed":
            assert live.pop(addr) == size
    # What is left live is what the devices hold at the dump, and what
    # PyTorch's segsum counts as allocated.
    held = sum(d["current_bytes"] for d in snap["devices"])
    assert out["live"] == out["active"] == sum(live.values()) == held
    ooms = [a for a in snap["ooms"].get("attempts", []) if a["outcome"] == "failed"]
    assert sum(1 for a in out["actions"] if a[0] == "oom") == len(ooms)


def test_memory_viz_refuses_a_thinned_log(tmp_path):
    r = subprocess.run([str(CLI), "export", "--format", "memory_viz",
                        str(INPUTS / "thinned.json"), "-o", str(tmp_path / "t.pickle")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "thinned" in r.stderr and "CUMEMTRACE_EVENTS" in r.stderr
    assert r.stderr.count("\n") == 1 and not (tmp_path / "t.pickle").exists()


# ---- pprof: decoded here with a minimal protobuf wire reader (independent
# of the protobuf-c encoder that wrote it) ----

def _varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if c < 0x80:
            return v, i


def _fields(b):
    """(field number, wire type, value) of a message; value is an int or
    bytes."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise AssertionError(f"bad wire type {wt}")
        yield num, wt, v


def _ints(fields, num, signed=True):
    out = []
    for n, wt, v in fields:
        if n != num:
            continue
        if wt == 2:  # packed
            j = 0
            while j < len(v):
                x, j = _varint(v, j)
                out.append(x)
        else:
            out.append(v)
    return [x - (1 << 64) if signed and x >= 1 << 63 else x for x in out]


def decode_pprof(data):
    f = list(_fields(data))
    strings = [v.decode() for n, _, v in f if n == 6]
    msgs = lambda num: [list(_fields(v)) for n, _, v in f if n == num]
    types = [(strings[_ints(m, 1)[0]], strings[_ints(m, 2)[0]]) for m in msgs(1)]
    # function: (name, file)
    funcs = {_ints(m, 1)[0]: (strings[(_ints(m, 2) or [0])[0]], strings[(_ints(m, 4) or [0])[0]])
             for m in msgs(5)}
    locs = {}
    for m in msgs(4):
        lines = [list(_fields(v)) for n, _, v in m if n == 4]
        locs[_ints(m, 1)[0]] = [(funcs[_ints(x, 1)[0]], (_ints(x, 2) or [0])[0]) for x in lines]
    samples = [(_ints(m, 1, signed=False), _ints(m, 2)) for m in msgs(2)]
    default = strings[(_ints(f, 14) or [0])[0]]
    return types, locs, samples, default, [strings[c] for c in _ints(f, 13)]


@pytest.mark.parametrize("name", GOOD)
def test_pprof_profile(name, tmp_path):
    import gzip
    out = export("pprof", INPUTS / name, tmp_path / "p.pb.gz")
    types, locs, samples, default, comments = decode_pprof(gzip.decompress(out.read_bytes()))
    assert types == [("inuse_space", "bytes"), ("inuse_space_exit", "bytes"),
                     ("alloc_space", "bytes"), ("alloc_objects", "count")]
    assert default == "inuse_space" and comments[0].startswith("cumemtrace ")
    snap = json.loads((INPUTS / name).read_text())
    col = lambda i: sum(v[i] for _, v in samples)
    with_stack = lambda key: sum(g["bytes"] for d in snap["devices"] for g in d[key]
                                 if g["stack"])
    tensors = any(d.get("tensors") or d.get("peak_tensors") for d in snap["devices"])
    # PyTorch's tensors and cache where the file has them, else the driver's
    for c, (key, tkey) in enumerate([("at_peak", "peak_tensors"), ("live", "tensors")]):
        if any(d.get(tkey) for d in snap["devices"]):
            assert col(c) == sum(tensor_sum(d[tkey]) for d in snap["devices"] if d.get(tkey))
        else:
            assert col(c) == with_stack(key)
    rows = [r for r in snap["events"]["data"] if r[1] >= 0 and r[3] > 0 and r[4]]
    assert col(2) == sum(r[3] for r in rows) and col(3) == len(rows)
    stacks = {s["id"]: s for s in snap["stacks"]}
    entries = {s["entry"] for s in snap["stacks"]}
    for ids, v in samples:
        if tensors and v[2] == 0 and v[3] == 0:
            continue  # a tensor group: no entry point (test_pprof_of_pytorchs_tensors)
        # leaf first: the entry point, then the frames innermost first
        assert locs[ids[0]][0][0][0] in entries
        assert all(len(locs[i]) == 1 for i in ids)
    # A Python frame: its function, in its file, at its line.
    pylines = {(f["function"], f["file"], f["line"]) for s in stacks.values()
               for f in s["frames"] if f.get("module") == "python"}
    pylines |= {(f["function"], f["file"], f["line"]) for d in snap["devices"]
                for k in ("tensors", "peak_tensors") if d.get(k)
                for g in d[k]["groups"] for f in g["stack"]}
    got = {(n, file, ln) for ids, _ in samples for i in ids
           for (n, file), ln in locs[i] if ln}
    assert got <= pylines
    used = {s_id for d in snap["devices"] for k in ("at_peak", "live") for g in d[k]
            for s_id in [g["stack"]] if s_id}
    if any(f.get("module") == "python" for i in used for f in stacks[i]["frames"]):
        assert got, "Python frames lost their lines"
    if snap["events"]["stride"] > 1:
        assert any("lower bounds" in c for c in comments)


@pytest.mark.parametrize("name", ["tensors_exit.json", "tensors_oom.json"])
def test_pprof_of_pytorchs_tensors(name, tmp_path):
    """pprof's inuse values in a PyTorch process: a sample per tensor stack,
    leaf first, with the group's bytes at the peak and at the dump; its
    cache one sample; --segments gives the driver's groups back."""
    import gzip
    out = export("pprof", INPUTS / name, tmp_path / "p.pb.gz")
    _, locs, samples, _, _ = decode_pprof(gzip.decompress(out.read_bytes()))
    snap = json.loads((INPUTS / name).read_text())
    d = snap["devices"][0]
    got = {}
    for ids, v in samples:
        names = []
        for i in reversed(ids):  # root first
            (fn, file), ln = locs[i][0]
            names.append(f"{file}:{ln}:{fn}" if ln else fn)
        got[";".join(names)] = (v[0], v[1])
    for g in d["peak_tensors"]["groups"]:
        if g["stack"]:
            whole = ";".join("%s:%d:%s" % (f["file"], f["line"], f["function"])
                             for f in reversed(g["stack"]))
            assert got[whole][0] >= g["bytes"], whole
    if d["tensors"]["cache"]["bytes"]:
        assert got["[PyTorch's cache]"][1] == d["tensors"]["cache"]["bytes"]
    seg = subprocess.run([str(CLI), "export", "--format", "pprof", "--segments",
                          str(INPUTS / name)], capture_output=True, timeout=60, check=True)
    _, _, ssamples, _, _ = decode_pprof(gzip.decompress(seg.stdout))
    assert sum(v[0] for _, v in ssamples) == sum(g["bytes"] for g in d["at_peak"] if g["stack"])


def test_memory_viz_blocks_carry_the_whole_stack(tmp_path):
    """A block's stack is cut at its innermost 64 frames in the file
    (allocator_segments); where one tensor group's whole stack begins with
    those 64 frames, memory_viz gets the whole stack - as PyTorch's own
    _dump_snapshot has it - and a cut stack no group continues stays cut."""
    import pickle
    s = json.loads((INPUTS / "tensors_exit.json").read_text())
    d = s["devices"][0]
    lib = "/venv/lib/python3.12/site-packages/transformers/models/x/modeling_x.py"
    deep = [{"file": lib, "line": 100 + i, "function": f"f{i}"} for i in range(76)]
    g = d["tensors"]["groups"][0]
    g["stack"] = deep + g["stack"]
    assert len(g["stack"]) > 64
    other = [{"file": lib, "line": 900 + i, "function": f"h{i}"} for i in range(64)]
    d["allocator_segments"] = {
        "count": 1, "blocks": 2,
        "stacks": [g["stack"][:64], other],
        "segments": [{"address": "0x7f0000000000", "bytes": 4 << 20, "pool": "large",
                      "blocks": [[0, 2 << 20, "allocated", 0], [2 << 20, 2 << 20, "allocated", 1]]}]}
    src = tmp_path / "deep.json"
    src.write_text(json.dumps(s))
    out = export("memory_viz", src, tmp_path / "deep.pickle")
    snap = pickle.loads(out.read_bytes())
    [seg] = [x for x in snap["segments"] if x["address"] == 0x7f0000000000]
    whole = [(f["filename"], f["line"], f["name"]) for f in seg["blocks"][0]["frames"]]
    assert whole == [(f["file"], f["line"], f["function"]) for f in g["stack"]], whole
    assert len(seg["blocks"][1]["frames"]) == 64


def test_help_lists_every_export_format():
    usage = subprocess.run([str(CLI), "export", "--help"], capture_output=True,
                           text=True, check=True).stdout
    formats = usage.split("--format ", 1)[1].split()[0].split("|")
    assert formats == ["speedscope", "memory_viz", "pprof"], usage
    top = subprocess.run([str(CLI), "--help"], capture_output=True, text=True,
                         check=True).stdout
    line = " ".join(l.strip() for l in top.split("  export", 1)[1].split("\n")[:2])
    missing = [f for f in formats if f not in line]
    assert not missing, f"cumemtrace --help does not list {missing}: {line}"
