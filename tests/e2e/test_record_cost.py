"""The tracker's added cost per allocation does not grow with the number of
live allocations (a hash whose low bits barely moved for
2 KiB strides left uthash stuck at 128 buckets, quadratic in the live
count).  Counted in instructions under callgrind, in one run: exact on a
loaded machine, where timings are not."""
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, SAN_RUNTIME, within_budget

COUNTS_INSTRUCTIONS = True  # conftest.py: marked `instructions`, make test-quick skips

PROG = BUILD / "tests" / "unit" / "record_cost"


def inclusive(annotated, fn):
    m = re.search(r"^\s*([\d,]+) .*:%s \[" % fn, annotated, re.M)
    assert m, f"no count for {fn} in:\n{annotated}"
    return int(m.group(1).replace(",", ""))


def counted(tmp_path, fns, *args):
    """Inclusive instructions of each function in fns, from one callgrind
    run of record_cost with args that counts only inside them."""
    assert shutil.which("valgrind"), \
        "valgrind not found: run scripts/install-deps.sh"
    out = tmp_path / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    "--collect-atstart=no", *[f"--toggle-collect={f}" for f in fns],
                    str(PROG), *args],
                   check=True, capture_output=True, timeout=180)
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)],
                               check=True, capture_output=True, text=True).stdout
    return [inclusive(annotated, f) for f in fns]


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_cost_per_allocation_is_flat_from_50k_to_400k_live(tmp_path):
    small, large = counted(tmp_path, ["pairs_at_50k", "pairs_at_400k"])
    print(f"instructions per alloc/free pair: {small / 20000:.0f} at 50k live, "
          f"{large / 20000:.0f} at 400k live")
    assert large <= 2 * small, (small, large)


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_fixed_cost_per_pair_is_one_lean_trip_each_way(tmp_path):
    """The tracker's bookkeeping per allocation + free (stack
    already interned, no event log) was ~800 instructions - two pthread
    mutex round trips and uthash's insert, find and delete; one futex-lock
    trip each way and an open-addressed table bring it to ~500."""
    per_pair = counted(tmp_path, ["pairs_at_50k"])[0] / 20000
    # measured on the tree of 2026-12-07
    within_budget("instructions per alloc/free pair at 50k live", per_pair, 390)


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_hooks_path_per_pair_with_the_log_on(tmp_path):
    """The hooks' path (record_alloc_at with the stack in the
    thread's cache, record_free_take, record_free_finish; every event
    logged) cost 637 instructions a pair: the row built on the stack and
    copied by an out-of-line push, every event stamped by a second clock
    read under the lock, the entry filled and the site looked up inside the
    critical section.  A few stores per row, the caller's time clamped, the
    entry and the cached site settled before the lock: ~485."""
    per_pair = counted(tmp_path, ["pairs_logged"], "logged")[0] / 20000
    # measured on the tree of 2026-12-07
    within_budget("instructions per logged alloc/free pair (hooks' path)", per_pair, 464)


@pytest.mark.skipif(SAN_RUNTIME is not None,
                    reason="valgrind cannot run sanitizer-instrumented code")
def test_hooks_path_per_pair_once_the_log_thins(tmp_path):
    """A long run's log is full and thinning (past
    CUMEMTRACE_EVENTS), and every thinning of the full log binary-searched
    the bucket size with seven counting passes over it, and every push
    scanned the latest bucket, under the lock: 791 instructions a pair in
    that steady state.  Once thinned, each coarser bucket is applied to the
    rows in turn - the same bucket, in one or two passes (725) - and a push
    between its pool's extrema in the latest bucket, which changes nothing,
    is told so from the extrema kept per pool: ~648."""
    per_pair = counted(tmp_path, ["pairs_thinned"], "thinned")[0] / 20000
    # measured on the tree of 2026-12-07
    within_budget("instructions per logged alloc/free pair, log thinning", per_pair, 625)
