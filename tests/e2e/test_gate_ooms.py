"""`diff --max-growth` fails the gate when NEW ran out of
memory more often than BASE (more OOM chains, or more chains that failed for
good), in the one-file diff and in the many-rank diff, unless --allow-oom
says that only peaks count."""
import os
import subprocess
import sys

import pytest

from conftest import CLI, ROOT

sys.path.insert(0, str(ROOT / "tests" / "golden"))
from snapgen import MiB, Device, Stack, dump, py, snapshot  # noqa: E402

S = Stack(1, "cudaMalloc", [py("/p/train.py", 10, "main")])


def attempts(ooms, recovered):
    """One failed attempt per chain; the first `recovered` chains then succeed."""
    rows = []
    for c in range(ooms):
        rows.append({"t_ns": 500 + 10 * c, "device": 0, "requested_bytes": 64 * MiB,
                     "chain": c + 1, "attempt": 1, "outcome": "failed"})
        if c < recovered:
            rows.append({"t_ns": 505 + 10 * c, "device": 0, "requested_bytes": 64 * MiB,
                         "chain": c + 1, "attempt": 2, "outcome": "recovered"})
    return rows


def snap(path, ooms=0, recovered=0, rank=None, peak=100 * MiB):
    doc = snapshot(devices=[Device(0, 1_000, [(S, "device", peak, 1)],
                                   [(S, "device", peak, 1)])],
                   stacks=[S], rank=rank,
                   ooms={"count": ooms, "failed_attempts": ooms, "recovered": recovered,
                         "retry_released_bytes": 0, "suppressed": 0, "dumps": [],
                         "attempts": attempts(ooms, recovered)})
    dump(doc, path)
    return path


def diff(*args):
    return subprocess.run([str(CLI), "diff", *map(str, args)], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, NO_COLOR="1"))


@pytest.mark.parametrize("base,new,fails", [
    ((0, 0), (1, 0), True),    # a new OOM that failed for good
    ((0, 0), (1, 1), True),    # a new OOM chain, recovered: still more OOMs
    ((1, 1), (1, 0), True),    # as many chains, but one now fails for good
    ((2, 0), (1, 0), False),   # fewer
    ((1, 0), (1, 0), False),   # the same
])
def test_one_file_gate_counts_ooms(tmp_path, base, new, fails):
    a = snap(tmp_path / "a.json", *base)
    b = snap(tmp_path / "b.json", *new)  # the same peak: only the OOMs differ
    r = diff(a, b, "--max-growth", "5%")
    assert r.returncode == (1 if fails else 0), r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    if fails:
        assert last.startswith("gate FAILED: OOMs"), r.stdout
        assert f"{base[0]} -> {new[0]}" in last, last
        assert "--allow-oom" in last, last
    else:
        assert last.startswith("gate passed"), r.stdout
    allowed = diff(a, b, "--max-growth", "5%", "--allow-oom")
    assert allowed.returncode == 0, allowed.stdout
    assert "gate passed" in allowed.stdout


def test_one_file_gate_reports_peak_and_ooms(tmp_path):
    a = snap(tmp_path / "a.json")
    b = snap(tmp_path / "b.json", 1, 0, peak=200 * MiB)
    r = diff(a, b, "--max-growth", "5%")
    assert r.returncode == 1
    failed = [l for l in r.stdout.splitlines() if l.startswith("gate FAILED")]
    assert len(failed) == 2 and "peak grew" in failed[0] and "OOMs 0 -> 1" in failed[1], failed


def job(d, ooms):
    d.mkdir()
    for rank, (n, rec) in enumerate(ooms):
        snap(d / f"cumemtrace.python3.{7000 + rank}.{rank}.json", n, rec, rank=rank)
    return d


def test_many_rank_gate_counts_ooms(tmp_path):
    a = job(tmp_path / "a", [(0, 0), (0, 0)])
    b = job(tmp_path / "b", [(0, 0), (1, 0)])
    r = diff(a, b, "--max-growth", "5%")
    assert "ranks that ran out of memory 0 -> 1" in r.stdout, r.stdout
    assert r.returncode == 1, r.stdout
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("gate FAILED: OOMs 0 -> 1"), last
    assert diff(a, b, "--max-growth", "5%", "--allow-oom").returncode == 0
    # a recovered chain in BASE that fails for good in NEW
    c = job(tmp_path / "c", [(0, 0), (1, 1)])
    d = job(tmp_path / "d", [(0, 0), (1, 0)])
    r = diff(c, d, "--max-growth", "5%")
    assert r.returncode == 1, r.stdout
    assert diff(d, c, "--max-growth", "5%").returncode == 0
