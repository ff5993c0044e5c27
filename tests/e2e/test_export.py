"""`cumemtrace export`: files other viewers read, checked against their
format's definition and against the snapshot's own numbers."""
import json
import subprocess

import pytest

from conftest import CLI, ROOT

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
