"""`cumemtrace export --format memory_viz` of a real PyTorch run, read back
by PyTorch's own torch.cuda._memory_viz (what pytorch.org/memory_viz runs):
its text views, its accounting and both plots work on our file, and the
segments it sees are the ones PyTorch's memory_stats() counted."""
import json
import select
import subprocess
import sys

import pytest

from conftest import CLI, REAL, TIMEOUT, line_of

# Runs in a child: nothing in this process imports torch (conftest.py).
# format_flamegraph is replaced because its default downloads flamegraph.pl.
READ = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
d = pickle.load(open(sys.argv[1], "rb"))
ident = lambda text: text
acts = [e for t in d["device_traces"] for e in t]
print(json.dumps({
    "segments_lines": len(mv.segments(d, format_flamegraph=ident).splitlines()),
    "memory_lines": len(mv.memory(d, format_flamegraph=ident).splitlines()),
    "segsum": mv.segsum(d),
    "trace": mv.trace(d),
    "trace_plot": len(mv.trace_plot(d)),
    "segment_plot": len(mv.segment_plot(d)),
    "segments": len(d["segments"]),
    "reserved": sum(s["total_size"] for s in d["segments"]),
    "active": sum(mv.calc_active(s) for s in d["segments"]),
    "allocs": sum(1 for e in acts if e["action"] == "alloc"),
    "frees": sum(1 for e in acts if e["action"] == "free_completed"),
    "files": sorted({f["filename"] for e in acts for f in e["frames"]}),
}))
"""


# One child that has imported torch runs every reading of this module
# (importing torch is most of a reading's time): each request is a script
# and its arguments, run as `python -c` would in a fresh namespace, its
# stdout and any traceback sent back as one JSON line.
SERVE = r"""
import contextlib, io, json, sys, traceback
import torch.cuda._memory_viz  # noqa: F401
for line in sys.stdin:
    req = json.loads(line)
    out = io.StringIO()
    sys.argv = ["-c", *req["args"]]
    try:
        with contextlib.redirect_stdout(out):
            exec(req["code"], {"__name__": "__main__"})
        rc, err = 0, ""
    except BaseException:
        rc, err = 1, traceback.format_exc()
    sys.__stdout__.write(json.dumps({"rc": rc, "out": out.getvalue(), "err": err}) + "\n")
    sys.__stdout__.flush()
"""


@pytest.fixture(scope="module")
def in_torch():
    """Runs a reading script (READ, BLOCKS, EXIT_BLOCKS) with its arguments
    in the module's torch child; returns (returncode, stdout, stderr)."""
    p = subprocess.Popen([sys.executable, "-c", SERVE], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)

    def go(code, *args):
        p.stdin.write(json.dumps({"code": code, "args": [str(a) for a in args]}) + "\n")
        p.stdin.flush()
        ready, _, _ = select.select([p.stdout], [], [], TIMEOUT)
        assert ready, f"the torch child did not answer in {TIMEOUT} s"
        line = p.stdout.readline()
        assert line, f"the torch child ended: {p.wait()}"
        got = json.loads(line)
        return got["rc"], got["out"], got["err"]
    yield go
    p.stdin.close()
    p.wait(timeout=TIMEOUT)


def test_memory_viz_of_a_real_run_reads_in_torch(scenario, tmp_path, in_torch):
    r = scenario("default_alloc.py")
    t = r.torch
    snap = r.files[[s["reason"] for s in r.snapshots].index("exit")]
    out = tmp_path / "run.pickle"
    e = subprocess.run([str(CLI), "export", "--format", "memory_viz", str(snap), "-o", str(out)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert e.returncode == 0, e.stderr
    rc, stdout, stderr = in_torch(READ, out)
    assert rc == 0, stderr
    got = json.loads(stdout)
    assert got["trace_plot"] > 0 and got["segment_plot"] > 0
    assert got["segments_lines"] > 0 and got["memory_lines"] > 0 and got["segsum"]
    # Our segments are the device memory PyTorch reserved, one per cudaMalloc
    # it made and did not give back, cut into its blocks (the exit's layout):
    # the active ones are its live tensors.
    if not REAL:
        assert got["reserved"] == t["reserved"]
        assert got["active"] == t["allocated"]
        assert got["segments"] == t["segments_allocated"] - t["segments_freed"]
        assert got["allocs"] == t["segments_allocated"]
        assert got["frees"] == t["segments_freed"]
    # Each action carries the script's Python frames.
    assert any(f.endswith("default_alloc.py") for f in got["files"]), got["files"]


# PyTorch's segments and their blocks, from its own pickle and from ours.
BLOCKS = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
out = {}
for name in sys.argv[1:]:
    d = pickle.load(open(name, "rb"))
    segs = sorted((s for s in d["segments"] if s["device"] == 0), key=lambda s: s["address"])
    out[name] = {
        "segments": [[s["address"], s["total_size"], s["segment_type"],
                      [[b["address"], b["size"], b["state"]] for b in s["blocks"]]]
                     for s in segs],
        "segsum": mv.segsum(d),
        "allocated": sum(s["allocated_size"] for s in segs),
        "active": sum(mv.calc_active(s) for s in segs),
    }
print(json.dumps(out))
"""


def test_memory_viz_has_pytorchs_tensor_blocks_at_an_oom(scenario, tmp_path, in_torch):
    """The export of a post-mortem holds PyTorch's own
    segments cut into its blocks (live tensors, cached free blocks), as its
    _dump_snapshot at the same failure has them - not one block per
    driver allocation."""
    r = scenario("tensors_transformer_oom.py", memory="2GiB")
    assert r.torch["raised"]
    [pm] = [f for f, s in zip(r.files, r.snapshots) if s["reason"] == "oom"]
    out = tmp_path / "oom.pickle"
    e = subprocess.run([str(CLI), "export", "--format", "memory_viz", str(pm), "-o", str(out)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert e.returncode == 0, e.stderr
    theirs = r.files[0].parent / "torch_snapshot.pickle"
    rc, stdout, stderr = in_torch(BLOCKS, out, theirs)
    assert rc == 0, stderr
    got = json.loads(stdout)
    ours, torch_own = got[str(out)], got[str(theirs)]
    assert ours["segments"] == torch_own["segments"]
    assert any(len(s[3]) > 1 for s in ours["segments"]), ours["segments"]
    assert ours["allocated"] == torch_own["allocated"] and ours["active"] == torch_own["active"]
    # PyTorch's text view of them agrees, but for the bytes each tensor's
    # request left unused in its block (requested_size: not recorded)
    def totals(text):
        return [ln for ln in text.splitlines()
                if ln.strip().startswith(("segments:", "total_reserved:", "total_allocated:"))]
    assert totals(ours["segsum"]) and totals(ours["segsum"]) == totals(torch_own["segsum"])


# Each segment and block with the innermost frames of the block (file, line).
EXIT_BLOCKS = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
out = {}
for name in sys.argv[1:]:
    d = pickle.load(open(name, "rb"))
    segs = sorted((s for s in d["segments"] if s["device"] == 0), key=lambda s: s["address"])
    out[name] = {
        "segments": [[s["address"], s["total_size"], s["segment_type"], s["allocated_size"],
                      s["active_size"], [[b["address"], b["size"], b["state"],
                                          [[f["filename"], f["line"]] for f in b["frames"]]]
                                         for b in s["blocks"]]]
                     for s in segs],
        "segsum": mv.segsum(d),
        "active": sum(mv.calc_active(s) for s in segs),
    }
print(json.dumps(out))
"""


def export_beside_torchs(snap, out, r, in_torch):
    """Exports `snap` as memory_viz to `out` and reads it beside the
    torch_snapshot.pickle the scenario saved, through EXIT_BLOCKS: (ours,
    PyTorch's own)."""
    e = subprocess.run([str(CLI), "export", "--format", "memory_viz", str(snap), "-o", str(out)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert e.returncode == 0, e.stderr
    theirs = r.files[0].parent / "torch_snapshot.pickle"
    rc, stdout, stderr = in_torch(EXIT_BLOCKS, out, theirs)
    assert rc == 0, stderr
    got = json.loads(stdout)
    return got[str(out)], got[str(theirs)]


def test_memory_viz_has_pytorchs_tensor_blocks_at_exit(scenario, tmp_path, in_torch):
    """At the exit, the exit snapshot carries PyTorch's
    segments and blocks as its layer handed them over at interpreter exit
    (devices[].allocator_segments), and the export holds them exactly as
    torch.cuda.memory._snapshot() taken at the script's end has them -
    addresses, sizes, states, per-segment totals, and each live block's
    Python frames from PyTorch's allocation history."""
    r = scenario("memviz_exit.py")
    snap = r.files[[s["reason"] for s in r.snapshots].index("exit")]
    ours, torch_own = export_beside_torchs(snap, tmp_path / "exit.pickle", r, in_torch)
    assert ours["segments"] == torch_own["segments"]
    assert ours["segsum"] == torch_own["segsum"]
    if not REAL:
        assert ours["active"] == r.torch["allocated"]
        assert sum(s[1] for s in ours["segments"]) == r.torch["reserved"]
    blocks = [b for s in ours["segments"] for b in s[5]]
    assert {"active_allocated", "inactive"} <= {b[2] for b in blocks}
    assert {"small", "large"} <= {s[2] for s in ours["segments"]}
    assert any(len(s[5]) > 2 for s in ours["segments"])
    # The frames are the script's lines: the parameter, the kept activations
    # and the 9 MiB buffer each name the line that allocated them.
    script = "memviz_exit.py"
    lines = {b[3][0][1] for b in blocks if b[3] and b[3][0][0].endswith(script)}
    for marker in ("WIDE", "KEPT", "BIG"):
        assert line_of(script, marker) in lines, (marker, lines)


@pytest.mark.parametrize("mode", ["signal", "api"])
def test_memory_viz_has_pytorchs_tensor_blocks_of_a_running_jobs_dump(tmp_path, mode,
                                                                      traced_only, in_torch):
    """At a dump of a running job: a SIGUSR1 dump (the
    main thread asked through Py_AddPendingCall) and a cumemtrace_dump()
    from the main thread (read on it) carry PyTorch's segments and blocks
    of that moment as its layer read them for the dump, and the export holds
    them exactly as torch.cuda.memory._snapshot() taken just before (the
    loop allocates nothing after it) - the blocks' frames included."""
    env = {"CUMEMTRACE_SIGNAL": "USR1"} if mode == "signal" else None
    if mode == "signal" and REAL:
        pytest.skip("CUMEMTRACE_SIGNAL paced for the simulated GPU")
    r = traced_only("dump_midrun.py", mode, env=env)  # test_dumps.py's run of it
    assert r.returncode == 0, r.stderr
    [snap] = [f for f, s in zip(r.files, r.snapshots) if s["reason"] == mode]
    doc = json.loads(snap.read_text())
    assert doc["allocator_refresh"]["answered"] is True, doc["allocator_refresh"]
    assert doc["allocator_refresh"]["direct"] is (mode == "api")
    ours, torch_own = export_beside_torchs(snap, tmp_path / f"{mode}.pickle", r, in_torch)
    assert ours["segments"] == torch_own["segments"]
    assert ours["segsum"] == torch_own["segsum"]
    assert ours["active"] == r.torch["allocated"]
    blocks = [b for s in ours["segments"] for b in s[5]]
    assert {"active_allocated", "inactive"} <= {b[2] for b in blocks}
    script = "dump_midrun.py"
    lines = {b[3][0][1] for b in blocks if b[3] and b[3][0][0].endswith(script)}
    assert line_of(script, "HISTORY") in lines, lines
