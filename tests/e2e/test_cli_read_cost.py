"""What reading a snapshot costs the CLI, per byte of the file (`report` of 1
M live allocations / 100 k stacks took 0.79 s CPU, `diff` of
two 1.47 s).  Counted in instructions under callgrind on a generated
snapshot of the same shape, smaller: exact on a loaded machine, where
timings are not.  The reader spent ~1800 instructions on each frame
object, most of which repeat byte for byte in other stacks."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import CLI, MiB, ROOT, SAN_RUNTIME, within_budget

COUNTS_INSTRUCTIONS = True  # conftest.py: marked `instructions`, make test-quick skips


def inclusive(annotated, fn):
    m = re.search(r"^\s*([\d,]+) .*:%s \[" % fn, annotated, re.M)
    assert m, f"no count for {fn} in:\n{annotated}"
    return int(m.group(1).replace(",", ""))


def gen(path, stacks):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_big_snapshot.py"),
                    "--allocations", str(10 * stacks), "--stacks", str(stacks),
                    "--events", str(stacks), "-o", str(path)],
                   check=True, capture_output=True, timeout=120)


def read_cost(tmp_path, snap, *argv):
    out = tmp_path / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    "--collect-atstart=no", "--toggle-collect=snapshot_read_file",
                    str(CLI), *argv, str(snap)],
                   check=True, capture_output=True, timeout=300)
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)],
                               check=True, capture_output=True, text=True).stdout
    return inclusive(annotated, "snapshot_read_file")


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_reading_costs_few_instructions_per_byte(tmp_path):
    assert shutil.which("valgrind"), "valgrind not found: run scripts/install-deps.sh"
    snap = tmp_path / "s.json"
    gen(snap, 5000)
    size = snap.stat().st_size
    per_byte = read_cost(tmp_path, snap, "report") / size
    # 43 when every frame object was parsed field by field; 23.5 with frames
    # memoised by their bytes, keys compared in place and the file mapped;
    # 20.2 measured on the tree of 2026-12-07.
    within_budget(f"snapshot_read_file, instructions a byte of a {size} byte file",
                  per_byte, 20.2)


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_the_bench_shape_reads_in_few_instructions_per_byte(tmp_path):
    """`make bench`'s snapshot (1 M live / 100 k sites, an event
    row per allocation, frames drawn from pools of ~1.5 % of the frames)
    read at 18.6 instructions a byte and report took 0.94 s: the event rows
    cost ~2,000 instructions each (a call and a path push per value), the
    groups ~1,800, a repeated frame ~420.  The same shape at a twentieth
    here: 16.9 a byte on the reader before the fast lanes (json_lane.h),
    8.8 with them, 7.2 with report's event rows checked and not kept."""
    assert shutil.which("valgrind"), "valgrind not found: run scripts/install-deps.sh"
    snap = tmp_path / "bench_shape.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_big_snapshot.py"),
                    "--allocations", "50000", "--stacks", "5000", "--events", "50000",
                    "--python-frames", "1000", "--native-frames", "300", "-o", str(snap)],
                   check=True, capture_output=True, timeout=120)
    size = snap.stat().st_size
    per_byte = read_cost(tmp_path, snap, "report") / size
    within_budget(f"snapshot_read_file, instructions a byte of the bench's shape ({size} "
                  "bytes)", per_byte, 7.2)  # measured on the tree of 2026-12-07


def test_a_large_file_is_never_resident_whole(tmp_path):
    """The file is mapped and its pages given back behind the reader: the
    peak RSS of `report` stays below the file's size (it was the file plus
    the model: 50 MiB for this 34 MiB file)."""
    snap = tmp_path / "s.json"
    gen(snap, 20000)
    # From a child Python that only runs it: a process inherits the peak
    # RSS of the one it was forked from (here pytest's) when it execs.
    code = ("import resource, subprocess, sys; "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:quarantine_size_mb=0")
    out = subprocess.run([sys.executable, "-c", code, str(CLI), "report", str(snap)],
                         capture_output=True, text=True, timeout=120, env=env).stdout.split()
    assert out[0] == "0", out
    rss = int(out[1]) * 1024
    size = snap.stat().st_size
    print(f"peak RSS {rss / MiB:.1f} MiB reading a {size / MiB:.1f} MiB snapshot")
    limit = 0.9 * size
    if SAN_RUNTIME is not None:  # the sanitizers' shadow memory and quarantine
        limit = 4 * size
    assert rss < limit, (rss, size)


def peak_rss(*argv):
    """Peak RSS in bytes of argv run from a child Python that runs nothing
    else (a process inherits the peak RSS of the one it forked from)."""
    code = ("import resource, subprocess, sys; "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:quarantine_size_mb=0")
    out = subprocess.run([sys.executable, "-c", code, *map(str, argv)],
                         capture_output=True, text=True, timeout=120, env=env).stdout.split()
    assert out[0] == "0", out
    return int(out[1]) * 1024


def test_diff_keeps_no_event_rows(tmp_path):
    """report and diff read no event rows: each row is checked and counted
    but not kept (40 bytes a row; the bench's files have a million each:
    diff's peak RSS was 175 MiB, over the target's 150).  diff of two of
    these 44 MiB files peaked at 45 MiB, now 30."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for seed, path in ((1, a), (2, b)):
        subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_big_snapshot.py"),
                        "--allocations", "200000", "--stacks", "20000", "--events",
                        "200000", "--seed", str(seed), "-o", str(path)],
                       check=True, capture_output=True, timeout=120)
    rss = peak_rss(CLI, "diff", a, b)
    size = a.stat().st_size
    print(f"diff: peak RSS {rss / MiB:.1f} MiB for two {size / MiB:.1f} MiB snapshots")
    limit = 0.8 * size
    if SAN_RUNTIME is not None:  # the sanitizers' shadow memory and quarantine
        limit = 4 * size
    assert rss < limit, (rss, size)


def test_a_file_ending_at_a_page_boundary_reads(tmp_path):
    """The mapping puts a zero page after the file for the parser's
    sentinel, also when the size is a multiple of the page (no byte of the
    last page is past the end), and a cut one is still truncated."""
    good = tmp_path / "s.json"
    gen(good, 20)
    text = good.read_bytes().rstrip()
    page = os.sysconf("SC_PAGESIZE")
    padded = tmp_path / "page.json"
    padded.write_bytes(text + b" " * (-len(text) % page or page))
    assert padded.stat().st_size % page == 0
    a = subprocess.run([str(CLI), "report", str(good)], capture_output=True, timeout=60)
    b = subprocess.run([str(CLI), "report", str(padded)], capture_output=True, timeout=60)
    assert a.returncode == b.returncode == 0, b.stderr
    assert a.stdout == b.stdout.replace(str(padded).encode(), str(good).encode())
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[:2 * page])
    c = subprocess.run([str(CLI), "report", str(cut)], capture_output=True, text=True,
                       timeout=60)
    assert c.returncode != 0
    assert f"truncated after {2 * page} bytes" in c.stderr, c.stderr


def churn_cost(tmp_path, stacks):
    """Instructions inside report_churn per call site, for a generated file
    with a churn row on each of `stacks` sites."""
    snap = tmp_path / f"churn{stacks}.json"
    gen(snap, stacks)
    out = tmp_path / "callgrind.churn.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    "--collect-atstart=no", "--toggle-collect=report_churn",
                    str(CLI), "report", str(snap)],
                   check=True, capture_output=True, timeout=300)
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)],
                               check=True, capture_output=True, text=True).stdout
    return inclusive(annotated, "report_churn") / stacks


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_churn_table_is_linear_in_call_sites(tmp_path):
    """The churn table found each call site's row by a linear
    search of the rows so far - quadratic: 6,558 instructions a site at
    2,000 sites, 24,576 at 8,000 (report of the 100 k-site file took 5.5 s).
    Rows indexed by the dense site id: ~580 a site at both."""
    assert shutil.which("valgrind"), "valgrind not found: run scripts/install-deps.sh"
    small, large = churn_cost(tmp_path, 2000), churn_cost(tmp_path, 8000)
    print(f"report_churn: {small:.0f} instructions a site at 2000 sites, "
          f"{large:.0f} at 8000")
    assert large <= 1.3 * small, (small, large)
    within_budget("report_churn, instructions a site at 8000 sites", large,
                  590)  # measured on the tree of 2026-12-07 (573 at 2000)
