"""The CLI against the real library: two runs of examples/train_sim on the
simulated device that differ only in the batch size, so exactly one call site
(forward_layer's activations) differs, by an amount known in advance:
layers x 2048 (sequence) x hidden x 2 bytes (bf16) per sample of batch.
Skips when the library, the simulated device or the example is not built
(`make all build/examples/train_sim`; tests/cli.mk adds the example to
`make test`)."""
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import SAN_RUNTIME, cli
from needs import needs

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
CLI = BUILD / "cumemtrace"
NEEDED = [CLI, BUILD / "libcumemtrace.so", BUILD / "sim" / "libcudart.so.13",
          BUILD / "examples" / "train_sim"]

pytestmark = needs(all(p.exists() for p in NEEDED), " or ".join(str(p) for p in NEEDED),
                   "make test-bins builds them")

LAYERS, HIDDEN = 4, 4096
PER_SAMPLE = LAYERS * 2048 * HIDDEN * 2  # what one more sample adds at the peak


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("workload")
    env = dict(os.environ, LD_LIBRARY_PATH=str(BUILD / "sim"), SIMCUDA_MEMORY="24GiB",
               NO_COLOR="1")
    env.pop("LD_PRELOAD", None)
    if SAN_RUNTIME:  # an instrumented library needs its runtime first
        env.update(LD_PRELOAD=SAN_RUNTIME, ASAN_OPTIONS="detect_leaks=0")
    files = {}
    for batch in (8, 9):
        out = d / f"batch{batch}.json"
        r = subprocess.run([str(CLI), "run", "--output", str(out), "--",
                            str(BUILD / "examples" / "train_sim"), "--batch", str(batch),
                            "--layers", str(LAYERS), "--steps", "2"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        assert str(out) in r.stderr, "run lists the snapshot it wrote"
        files[batch] = out
    return files


def test_diff_names_the_call_site_and_the_exact_change(runs):
    r = cli("diff", "--bytes", runs[8], runs[9])
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Call sites at peak")[1].split("\n\n")[0]
    lines = section.splitlines()[2:]
    changed = [i for i, l in enumerate(lines) if l.lstrip()[:1].isdigit()]
    assert len(changed) == 1, section
    # train_sim is built with -g: the site is its static allocation helper,
    # named from DWARF with its line, and the caller line names the layer.
    row, callers = lines[changed[0]], lines[changed[0] + 1]
    assert "train_sim.c:" in row, section
    assert callers.lstrip().startswith("< train_sim!forward_layer"), section
    changed = [row]
    assert f"+{PER_SAMPLE} B" in changed[0]
    assert "(4 call sites unchanged)" in section  # adam_m and adam_v: two lines


def test_gate_across_the_threshold(runs):
    assert cli("diff", "--max-growth", f"{PER_SAMPLE}B", runs[8], runs[9]).returncode == 0
    assert cli("diff", "--max-growth", f"{PER_SAMPLE - 1}B", runs[8], runs[9]).returncode == 1
    base = json.loads(runs[8].read_text())["devices"][0]["peak_bytes"]
    pct = 100.0 * PER_SAMPLE / base
    assert cli("diff", "--max-growth", f"{pct + 0.01:.2f}%", runs[8], runs[9]).returncode == 0
    assert cli("diff", "--max-growth", f"{pct - 0.01:.2f}%", runs[8], runs[9]).returncode == 1


def test_views_of_a_real_snapshot(runs):
    snap = json.loads(runs[9].read_text())
    dev = snap["devices"][0]
    fg = cli("flamegraph", runs[9]).stdout
    assert sum(int(l.rpartition(" ")[2]) for l in fg.splitlines()) == dev["peak_bytes"]
    trace = json.loads(cli("timeline", "--format", "chrome", runs[9]).stdout)
    at_peak = [e["args"]["bytes"] for e in trace["traceEvents"]
               if e["ph"] == "C" and e["name"] == "device 0"
               and abs(e["ts"] - dev["peak_time_ns"] / 1000) < 0.0005]
    assert at_peak and at_peak[-1] == dev["peak_bytes"]
    rep = cli("report", runs[9])
    assert rep.returncode == 0 and "train_sim!forward_layer" in rep.stdout
    assert all(len(l) <= 80 for l in rep.stdout.splitlines())
