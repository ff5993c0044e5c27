"""`cumemtrace export`: files other viewers read, checked against their
format's definition and against the snapshot's own numbers."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, CLI, ROOT, base_env

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
    jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema not installed "
                                     "(scripts/install-deps.sh --ci installs it)")
    doc = json.loads(export("speedscope", INPUTS / name, tmp_path / "s.json").read_text())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    snap = json.loads((INPUTS / name).read_text())
    frames = doc["shared"]["frames"]
    by_name = {p["name"]: p for p in doc["profiles"]}
    stacks = {s["id"]: s for s in snap["stacks"]}
    for d in snap["devices"]:
        p = by_name.get(f"device {d['ordinal']} at peak")
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
    if snap.get("oom"):
        p = by_name[f"device {snap['oom']['device']} at the OOM"]
        assert sum(p["weights"]) == sum(g["bytes"] for g in snap["oom"]["live"])


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


@pytest.mark.skipif(not os.path.exists(TORCH_PY),
                    reason=f"no PyTorch environment at {TORCH_PY} (set CUMEMTRACE_TORCH_PYTHON)")
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
