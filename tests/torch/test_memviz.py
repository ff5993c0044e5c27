"""`cumemtrace export --format memory_viz` of a real PyTorch run, read back
by PyTorch's own torch.cuda._memory_viz (what pytorch.org/memory_viz runs):
its text views, its accounting and both plots work on our file, and the
segments it sees are the ones PyTorch's memory_stats() counted."""
import json
import subprocess
import sys

from conftest import CLI, REAL, TIMEOUT

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


def test_memory_viz_of_a_real_run_reads_in_torch(scenario, tmp_path):
    r = scenario("default_alloc.py")
    t = r.torch
    snap = r.files[[s["reason"] for s in r.snapshots].index("exit")]
    out = tmp_path / "run.pickle"
    e = subprocess.run([str(CLI), "export", "--format", "memory_viz", str(snap), "-o", str(out)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert e.returncode == 0, e.stderr
    p = subprocess.run([sys.executable, "-c", READ, str(out)], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["trace_plot"] > 0 and got["segment_plot"] > 0
    assert got["segments_lines"] > 0 and got["memory_lines"] > 0 and got["segsum"]
    # Our segments are the device memory PyTorch reserved, one per cudaMalloc
    # it made and did not give back.
    if not REAL:
        assert got["reserved"] == got["active"] == t["reserved"]
        assert got["segments"] == t["segments_allocated"] - t["segments_freed"]
        assert got["allocs"] == t["segments_allocated"]
        assert got["frees"] == t["segments_freed"]
    # Each action carries the script's Python frames.
    assert any(f.endswith("default_alloc.py") for f in got["files"]), got["files"]
