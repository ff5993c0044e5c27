"""Many ranks of one job as one view: a 4-rank job started like
torchrun (RANK, LOCAL_RANK, WORLD_SIZE) on the simulated GPU, rank 2 running
out of memory (tests/progs/rt_rank.c); `cumemtrace report DIR`, `--rank`,
`cumemtrace diff DIR_A DIR_B` with the gate on the worst rank; and 64
synthetic ranks merged in memory that does not grow with the ranks."""
import json
import os
import re
import resource
import subprocess
import sys

import pytest

from conftest import CLI, MiB, PROGS, base_env, cli

WORLD = 4


def job(tmp_path, name, **extra):
    """Runs the 4 ranks at once, as torchrun does, into tmp_path/name."""
    d = tmp_path / name
    d.mkdir()
    procs = []
    for r in range(WORLD):
        env = base_env(dict({"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(WORLD),
                             "SIMCUDA_MEMORY": "256M"}, **extra))
        procs.append(subprocess.Popen([str(PROGS / "rt_rank")], cwd=d, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    codes = [p.wait(timeout=60) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    return d, codes


def row(out, rank):
    m = re.search(rf"^ +{rank}  \S+:{rank} +(.*)$", out, re.M)
    assert m, out
    return m.group(1).split()


def test_torchrun_job_one_view(tmp_path):
    d, codes = job(tmp_path, "run", RT_RANK_OOM="2")
    assert codes == [0, 0, 1, 0]
    names = sorted(os.listdir(d))
    assert len(names) == 5, names  # four exit snapshots and rank 2's post-mortem
    snap = json.loads(next(d.glob("*.2.json")).read_text())
    assert (snap["process"]["rank"], snap["process"]["local_rank"],
            snap["process"]["world_size"]) == (2, 2, 4)
    r = cli("report", d)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("cumemtrace report: 4 ranks (world size 4), 5 files\n")
    # peak, at, at end, OOMs, written: 24 MiB of model + 8 + 4r of activations
    for rank in range(WORLD):
        cells = row(out, rank)
        assert cells[:2] == [f"{24 + 8 + 4 * rank}.0", "MiB"], cells
    assert row(out, 2)[-4:] == ["MiB", "1", "exit,", "oom"]          # held the model at exit
    assert row(out, 2)[-5:-3] == ["24.0", "MiB"]
    assert row(out, 0)[-2:] == ["0", "exit"]
    assert "missing" not in out
    # the time's width moves where the 80-column report wraps this sentence
    assert re.search(r"first failure: rank 2 ran out of memory first, [^,]* into the job, "
                     r"asking for 1\.02 GiB on device 0", " ".join(out.split())), out
    # Call sites summed over the ranks with their spread: the model is the
    # same everywhere, the activations grow with the rank.
    # (native frames may carry " at file:line" with debug information)
    assert re.search(r"96\.0 MiB  24\.0 MiB  24\.0 MiB    4/4  rt_rank!build_model", out), out
    assert re.search(r"56\.0 MiB  8\.00 MiB  20\.0 MiB    4/4  rt_rank!train_step.*\n"
                     r" +\[max: rank 3\] < rt_rank!main", out), out
    assert "detailed below: the post-mortem of rank 2, the first to fail" in out
    assert "OUT OF MEMORY on device 0" in out
    # one rank
    one = cli("report", d, "--rank", "3")
    assert one.returncode == 0, one.stderr
    assert "(pid" in one.stdout and "rank 3)" in one.stdout
    assert "4 ranks" not in one.stdout
    two = cli("report", d, "--rank", "2")
    assert "\nFiles of this rank\n" in two.stdout, two.stdout
    assert re.search(r"^  oom .* \.oom\.0\.json\n +out of memory: 1\.02 GiB asked for on "
                     r"device 0$", two.stdout, re.M), two.stdout
    assert re.search(r"^  exit .* \.json\n +detailed above$", two.stdout, re.M), two.stdout
    bad = cli("report", d, "--rank", "9")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "no file of rank 9 among the 5 given (ranks present: 0-3)" in bad.stderr


def test_diff_of_two_jobs_gates_on_the_worst_rank(tmp_path):
    base, codes = job(tmp_path, "base")
    assert codes == [0] * WORLD
    new, codes = job(tmp_path, "new", RT_RANK_GROW="1")
    assert codes == [0] * WORLD
    assert len(os.listdir(base)) == len(os.listdir(new)) == WORLD
    same = cli("diff", base, base, "--max-growth", "0%")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "gate passed: no rank's peak grew more than 0%" in same.stdout
    r = cli("diff", base, new, "--max-growth", "5%")
    assert r.returncode == 1, r.stdout + r.stderr
    # rank 1: 36 MiB -> 40 MiB, +11.1%
    assert re.search(r"rank 1 +36\.0 MiB +40\.0 MiB +\+4\.00 MiB +\+11\.1", r.stdout), r.stdout
    assert ("gate FAILED: rank 1 peak grew by 4194304 bytes (+11.1111%), more than 5%"
            in r.stdout)
    ok = cli("diff", base, new, "--max-growth", "12%")
    assert ok.returncode == 0


def test_a_restarted_job_is_flagged(tmp_path):
    d, _ = job(tmp_path, "run", RT_RANK_OOM="2")
    # torchrun --max-restarts: every rank again, new pids, same directory
    for r in range(WORLD):
        subprocess.run([str(PROGS / "rt_rank")], cwd=d, check=True, capture_output=True,
                       env=base_env({"RANK": str(r), "LOCAL_RANK": str(r),
                                     "WORLD_SIZE": str(WORLD), "SIMCUDA_MEMORY": "256M"}))
    out = cli("report", d).stdout
    assert out.startswith("cumemtrace report: 4 ranks (world size 4), 9 files\n"), out
    assert re.search(r"restarted: rank 0, rank 1, rank 2, rank 3 have files of several\s+"
                     r"processes", out), out
    # The newest files count (the restart ran without the OOM and freed
    # everything); the history stays: rank 2's OOM and its post-mortem.
    assert re.search(r"^ +2  \S+:2 +40\.0 MiB +\S+ \S+ +0 B +1  exit, oom$", out, re.M), out
    assert "detailed below: the post-mortem of rank 2, the first to fail" in out


def test_ranks_starting_together_all_write(tmp_path):
    """Regression: a rank's first CUDA call cleans stale temporaries in the
    output directory; it used to remove another rank's temporary between
    that rank's open and its lock, losing the snapshot ("cannot write
    snapshot ...: No such file or directory"), about one job in three."""
    for i in range(12):
        d, codes = job(tmp_path, f"round{i}")
        assert codes == [0] * WORLD
        assert len(list(d.glob("cumemtrace.*.json"))) == WORLD, sorted(os.listdir(d))


def synthetic(path, rank, stacks=200, groups_per_rank=50):
    """A small valid snapshot of one rank: `stacks` call sites shared by all
    ranks, at_peak over all of them, `groups_per_rank` of them live."""
    frames = lambda i: [{"module": "python", "file": "model.py", "line": 10 + i,
                         "function": f"layer{i}"}]
    at_peak = [{"stack": i + 1, "bytes": (i + 1 + rank) * MiB, "count": 1}
               for i in range(stacks)]
    peak = sum(g["bytes"] for g in at_peak)
    doc = {
        "format": "cumemtrace", "version": 1, "reason": "exit", "sequence": 0,
        "process": {"pid": 9000 + rank, "ppid": 1, "exe": "python3", "cmdline": [],
                    "host": f"node{rank // 8}", "rank": rank, "local_rank": rank % 8,
                    "world_size": 64, "start_wall_ns": 1764400000000000000,
                    "dump_time_ns": 5_000_000_000, "tool_version": "0.1.0"},
        "devices": [{"ordinal": rank % 8, "current_bytes": 0, "peak_bytes": peak,
                     "peak_time_ns": 1_000_000_000, "live": [], "at_peak": at_peak}],
        "stacks": [{"id": i + 1, "entry": "cudaMalloc", "frames": frames(i)}
                   for i in range(stacks)],
    }
    path.write_text(json.dumps(doc))


def peak_rss_kib(args):
    """Peak RSS of the CLI alone, from a child Python that only runs it."""
    code = ("import resource, subprocess, sys; "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    # ASan keeps freed memory in quarantine: what is freed must count as freed.
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:quarantine_size_mb=0")
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                         text=True, timeout=120, env=env).stdout.split()
    assert out[0] == "0"
    return int(out[1])


def test_64_synthetic_ranks_merge_in_bounded_memory(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    for r in range(64):
        synthetic(d / f"cumemtrace.python3.{9000 + r}.{r}.json", r, stacks=2000)
    r = cli("report", d, "--top", "3")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("cumemtrace report: 64 ranks (world size 64), 64 files\n")
    assert len(re.findall(r"^ +\d+  node\d:\d ", out, re.M)) == 64
    # Site i holds i+1+rank MiB on each rank: min on rank 0, max on rank 63.
    # sum(2000 + r for r in range(64)) MiB = 127 GiB
    assert re.search(r"127 GiB +1\.95 GiB +2\.01 GiB +64/64  "
                     r"model\.py:2009:layer1999\n +\[max: rank 63\]", out), out
    assert "(1997 more call sites)" in out
    # Memory: 8 more ranks' files must not cost what their contents do.
    small = tmp_path / "eight"
    small.mkdir()
    for name in sorted(os.listdir(d))[:8]:
        os.link(d / name, small / name)
    rss8 = peak_rss_kib([CLI, "report", small])
    rss64 = peak_rss_kib([CLI, "report", d])
    one_file_kib = os.path.getsize(next(d.iterdir())) // 1024
    growth_per_rank = (rss64 - rss8) / 56
    print(f"peak RSS: 8 ranks {rss8} KiB, 64 ranks {rss64} KiB, one file {one_file_kib} KiB")
    assert growth_per_rank < one_file_kib / 4, (rss8, rss64, one_file_kib)


def ranged(path, rank, devices):
    """A valid snapshot of one rank whose allocations were made in ranges
    (NVTX, docs/snapshot-format.md "phases"): devices = [(ordinal, {range
    path, None for outside every range: (MiB at the peak, MiB live)})]."""
    ids, listed = {}, []

    def phase(p):
        if p is None:
            return 0
        if p not in ids:
            parent, _, name = p.rpartition("/")
            up = phase(parent) if parent else 0
            ids[p] = len(listed) + 2            # 1 is the overflow phase
            listed.append({"id": ids[p], "parent": up, "name": name, "source": "nvtx",
                           "domain": None})
        return ids[p]

    devs = []
    for ordinal, ranges in devices:
        rows = [{"phase": phase(p), "bytes": live * MiB, "count": int(live > 0),
                 "at_peak_bytes": at_peak * MiB, "at_peak_count": int(at_peak > 0),
                 "allocs": 1, "bytes_allocated": max(at_peak, live) * MiB, "top_at_peak": [],
                 "sites": [[1, at_peak * MiB, live * MiB, 1, max(at_peak, live) * MiB]]}
                for p, (at_peak, live) in ranges.items()]
        peak, now = sum(r["at_peak_bytes"] for r in rows), sum(r["bytes"] for r in rows)
        devs.append({"ordinal": ordinal, "current_bytes": now, "peak_bytes": peak,
                     "peak_time_ns": 1_000_000_000,
                     "live": [{"stack": 1, "bytes": now, "count": 1}] if now else [],
                     "at_peak": [{"stack": 1, "bytes": peak, "count": 1}] if peak else [],
                     "by_phase": rows})
    doc = {
        "format": "cumemtrace", "version": 1, "reason": "exit", "sequence": 0,
        "process": {"pid": 9000 + rank, "ppid": 1, "exe": "python3", "cmdline": [],
                    "host": "node0", "rank": rank, "local_rank": rank, "world_size": 4,
                    "start_wall_ns": 1764400000000000000, "dump_time_ns": 5_000_000_000,
                    "tool_version": "0.1.0"},
        "devices": devs,
        "phases": {"count": len(listed) + 1, "pushes": len(listed), "overflow": 0,
                   "unbalanced_pops": 0, "too_deep": 0, "dropped_starts": 0,
                   "list": [{"id": 1, "parent": 0, "name": "(ranges past the limit of "
                             "distinct paths)", "source": "cumemtrace", "domain": None}]
                   + sorted(listed, key=lambda p: p["id"])},
        "stacks": [{"id": 1, "entry": "cudaMalloc",
                    "frames": [{"module": "python", "file": "train.py", "line": 7,
                                "function": "step"}]}],
    }
    path.write_text(json.dumps(doc))


def table(out, title):
    """The rows under the header of the table titled `title`, each cut at
    runs of 2+ spaces."""
    lines = out.split(f"\n{title}\n")[1].split("\n\n")[0].splitlines()
    return [re.split(r"  +", l.strip()) for l in lines[1:]]


def test_diff_by_range_of_two_jobs_compares_each_ranks_ranges(tmp_path):
    base, new = tmp_path / "base", tmp_path / "new"
    base.mkdir()
    new.mkdir()
    ranged(base / "r0.json", 0, [(0, {"train/step 1": (8, 0), "validation": (4, 2),
                                     None: (1, 1)})])
    # rank 1 has two devices: a range's bytes are summed over them
    ranged(base / "r1.json", 1, [(0, {"train/step 1": (8, 0), "validation": (4, 0)}),
                                 (1, {"train/step 1": (2, 0)})])
    ranged(base / "r2.json", 2, [(0, {"train/step 1": (9, 9)})])
    ranged(new / "r0.json", 0, [(0, {"train/step 1": (8, 0), "validation": (6, 3),
                                    None: (1, 1)})])
    ranged(new / "r1.json", 1, [(0, {"train/step 1": (8, 0), "checkpoint": (1, 1)}),
                                (1, {"train/step 1": (5, 0)})])
    ranged(new / "r3.json", 3, [(0, {"train/step 1": (7, 7)})])
    r = cli("diff", "--by", "range", "--bytes", "--top", "4", base, new)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    m = lambda n: f"{n * MiB} B"
    d = lambda n: f"{n * MiB:+d} B"
    # per rank: its peak is its highest device's (rank 1: 8 + 4 on device 0)
    assert table(out, "Peak per rank")[:2] == [["rank 0", m(13), m(15), d(2), "+15.38%"],
                                                ["rank 1", m(12), m(9), d(-3), "-25.00%"]]
    # largest change first; ties in rank order; the rank only BASE has is
    # GONE with its ranges, the one only NEW has NEW
    assert table(out, "Ranges at each rank's peak, largest change first") == [
        [m(9), "0 B", d(-9), "GONE", "rank 2", "train/step 1"],
        ["0 B", m(7), d(7), "NEW", "rank 3", "train/step 1"],
        [m(4), "0 B", d(-4), "GONE", "rank 1", "validation"],
        [m(10), m(13), d(3), "rank 1", "train/step 1"],       # 8 + 2 -> 8 + 5
        [f"(2 more changed ranks' ranges, {d(3)} in total)"],  # rank 0 +2, checkpoint +1
        ["(2 ranks' ranges unchanged)"]]                       # rank 0's train, outside
    live = table(out, "Live by range on each rank when the snapshots were taken "
                      "(at exit: leaks)")
    assert [m(2), m(3), d(1), "rank 0", "validation"] in live
    assert ["0 B", m(1), d(1), "NEW", "rank 1", "checkpoint"] in live
    assert ["(3 ranks' ranges unchanged)"] in live   # rank 0's train and outside, rank 1's train
    assert "Call sites" not in out                   # ranges instead, as for two files
    # the gate still judges each rank's peak: the new rank is the worst
    g = cli("diff", "--by", "range", "--max-growth", "10%", base, new)
    assert g.returncode == 1
    assert "gate FAILED: rank 3 peak grew by 7340032 bytes (new rank), more than 10%" in g.stdout


def test_diff_by_range_of_jobs_without_ranges_says_so(tmp_path):
    for name in ("base", "new"):
        (tmp_path / name).mkdir()
        for rank in range(2):
            synthetic(tmp_path / name / f"r{rank}.json", rank, stacks=3)
    r = cli("diff", "--by", "range", tmp_path / "base", tmp_path / "new")
    assert r.returncode == 0, r.stderr
    assert ("\nNeither job opened a range (NVTX, PyTorch's phases, cumemtrace_phase_push): "
            "nothing to compare by range\n") in r.stdout
    # what a job diff cannot group by is refused, not ignored
    bad = cli("diff", "--by", "function", tmp_path / "base", tmp_path / "new")
    assert bad.returncode == 2 and bad.stdout == ""
    assert ("--by function compares two files; directories compare whole stacks or "
            "(--by range) ranges") in bad.stderr


def test_ranks_tensor_line_without_user_frame_shows_its_stack(tmp_path):
    """A line of PyTorch's tensors with no user frame ("[no user frame]")
    has, under its row of the multi-rank table, the frames its blocks were
    made in - the note the rank's own holders table prints (one function
    writes both)."""
    from conftest import ROOT
    doc = json.loads((ROOT / "tests" / "golden" / "inputs" / "tensors_exit.json").read_text())
    files = []
    for rank in (0, 1):
        doc["process"].update(rank=rank, local_rank=rank, world_size=2, pid=5000 + rank)
        files.append(tmp_path / f"rank{rank}.json")
        files[-1].write_text(json.dumps(doc))
    r = cli("report", *files)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    merged = lines.index([l for l in lines if l.startswith("PyTorch's tensors by line at each")][0])
    own = [i for i, l in enumerate(lines) if l.rstrip().endswith("[no user frame]")]
    assert len(own) >= 2 and own[0] > merged, r.stdout
    assert lines[own[0] + 1].strip() == "in random.py:40:manual_seed", r.stdout
    assert lines[own[0] + 1].strip() == lines[own[1] + 1].strip(), r.stdout
