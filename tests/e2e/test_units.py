"""One range and one unit table everywhere (docs/units.md):
`cumemtrace run --depth` and CUMEMTRACE_DEPTH accept the same range
(src/common/settings.h); a size without a unit is refused by the CLI (an
error that says to add one) and by the library (a warning; the host runs
on unchanged, without the setting)."""
import json
import os

import pytest

from conftest import PROGS, cli, run_env

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden", "inputs")


@pytest.mark.parametrize("depth", ["0", "1", "256"])
def test_run_and_library_accept_the_same_depths(depth, tmp_path):
    r = cli("run", "--depth", depth, "--output", tmp_path / "s.json", "--",
            PROGS / "rt_workload", "basic", env=run_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ignoring" not in r.stderr, r.stderr
    snap = json.loads((tmp_path / "s.json").read_text())
    assert snap["config"]["depth"] == int(depth)


@pytest.mark.parametrize("depth", ["257", "1024", "-1"])
def test_run_and_library_refuse_the_same_depths(depth, run):
    r = cli("run", "--depth", depth, "--", "true")
    assert r.returncode == 2
    assert "--depth wants a frame count from 0 to 256" in r.stderr, r.stderr
    res = run(["rt_workload", "basic"], env={"CUMEMTRACE_DEPTH": depth})
    assert f"ignoring CUMEMTRACE_DEPTH='{depth}': expected an integer from 0 to 256" \
        in res.stderr, res.stderr
    assert res.only()["config"]["depth"] == 32


@pytest.mark.parametrize("value", ["8", "8 ", "1073741824", "0.5"])
def test_cli_refuses_a_size_without_a_unit(value):
    r = cli("run", "--limit", value, "--", "true")
    assert r.returncode == 2
    assert "--limit needs a unit" in r.stderr and f"{value}GiB" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    base = os.path.join(GOLDEN, "gate_base.json")
    r = cli("diff", "--max-growth", value, base, base)
    assert r.returncode == 2
    assert "--max-growth needs a unit" in r.stderr and f"{value}%" in r.stderr, r.stderr


@pytest.mark.parametrize("value,ok", [("8B", True), ("8GiB", True), ("8G", True),
                                      ("8gb", True), ("1.5MiB", True), ("8", False),
                                      ("8bytes", False), ("0B", False)])
def test_run_limit_units(value, ok):
    r = cli("run", "--limit", value, "--", "sh", "-c", 'echo "$CUMEMTRACE_LIMIT"',
            env=run_env({"NO_COLOR": "1"}))
    assert (r.returncode == 0) == ok, r.stderr
    if ok:
        assert r.stdout.strip() == value


def test_gate_in_bytes_needs_the_b(tmp_path):
    base = os.path.join(GOLDEN, "gate_base.json")
    new = os.path.join(GOLDEN, "gate_over5pct.json")
    assert cli("diff", "--max-growth", "5B", base, new).returncode == 1
    assert cli("diff", "--max-growth", "1TiB", base, new).returncode == 0


@pytest.mark.parametrize("var", ["CUMEMTRACE_LIMIT", "CUMEMTRACE_LIMIT_0"])
def test_library_warns_and_ignores_a_size_without_a_unit(var, run):
    # 8 bytes would refuse every allocation; the library must not apply it.
    bare = run(["rt_workload", "basic"], preload=False)
    res = run(["rt_workload", "basic"], env={var: "8"})
    assert res.stdout == bare.stdout          # the host saw no refusal
    lines = [l for l in res.stderr.splitlines() if var + "=" in l]
    assert len(lines) == 1, res.stderr
    assert f"ignoring {var}='8': a size needs a unit, e.g. 8GiB, 8MiB or 8B" in lines[0]
    snap = res.only()
    assert snap["config"]["limit_bytes"] == []
    assert snap["devices"][0]["by_kind"]["device"]["failures"] == 0


def test_library_takes_a_size_with_a_unit(run):
    snap = run(["rt_workload", "basic"], env={"CUMEMTRACE_LIMIT": "1GiB"}).only()
    assert snap["config"]["limit_bytes"] == [{"device": 0, "bytes": 1 << 30}]
