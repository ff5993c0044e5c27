"""The Chrome trace's per-call-site counter tracks (timeline --sites N):
at every event they add up to the device's exact total, and at the peak
each top site holds what the snapshot's at_peak says."""
import json
import subprocess

import pytest

from conftest import CLI, ROOT

INPUTS = ROOT / "tests" / "golden" / "inputs"


def trace(path, *args):
    r = subprocess.run([str(CLI), "timeline", "--format", "chrome", *args, str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", ["exit_train.json", "oom_exhausted.json", "rank0.json",
                                  "diff_new.json"])
def test_site_tracks_add_up(name):
    snap = json.loads((INPUTS / name).read_text())
    t = trace(INPUTS / name)
    assert t["otherData"]["site_tracks"] == "exact"
    for d in snap["devices"]:
        total = [e for e in t["traceEvents"] if e["name"] == f"device {d['ordinal']}" and
                 e["ph"] == "C"]
        sites = [e for e in t["traceEvents"] if e["name"] == f"device {d['ordinal']} by call site"]
        rows = [r for r in snap["events"]["data"] if r[1] == d["ordinal"]]
        assert len(sites) == len(rows)
        for s, r in zip(sites, rows):
            assert sum(s["args"].values()) == r[5]  # the log's exact current
            assert len(s["args"]) <= 9 and "other" in s["args"]
        # At the peak the named sites hold their at_peak bytes.
        at = [s for s, r in zip(sites, rows) if r[5] == d["peak_bytes"]][0]["args"]
        assert sum(at.values()) == d["peak_bytes"]
        assert sorted(v for k, v in at.items() if k != "other")[-1] == \
            max(g["bytes"] for g in d["at_peak"])
        assert total  # the totals stay beside them


def test_site_tracks_top_n():
    """--sites N: the N biggest sites at the peak get a track each, the
    rest is "other"."""
    snap = json.loads((INPUTS / "exit_train.json").read_text())
    d = snap["devices"][0]
    for n in (1, 3):
        t = trace(INPUTS / "exit_train.json", "--sites", str(n))
        sites = [e for e in t["traceEvents"] if e["name"] == f"device {d['ordinal']} by call site"]
        names = {k for s in sites for k in s["args"]} - {"other"}
        assert len(names) == min(n, len(d["at_peak"]))
        at = [s["args"] for s, r in zip(sites, [r for r in snap["events"]["data"]
                                               if r[1] == d["ordinal"]])
              if r[5] == d["peak_bytes"]][0]
        top = sorted((g["bytes"] for g in d["at_peak"]), reverse=True)[:n]
        assert sorted((v for k, v in at.items() if k != "other"), reverse=True) == top


def test_site_tracks_off_and_thinned():
    t = trace(INPUTS / "exit_train.json", "--sites", "0")
    assert not [e for e in t["traceEvents"] if e["name"].endswith("by call site")]
    assert t["otherData"]["site_tracks"] == "omitted: --sites 0"
    t = trace(INPUTS / "thinned.json")
    assert not [e for e in t["traceEvents"] if e["name"].endswith("by call site")]
    assert t["otherData"]["site_tracks"].startswith("omitted: the event log was thinned")
    r = subprocess.run([str(CLI), "timeline", "--sites", "x", str(INPUTS / "thinned.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--sites wants" in r.stderr
