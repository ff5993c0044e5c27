"""The order a snapshot lists call sites in (the radix sort must
keep it): live, at_peak and churn largest first, ties by stack id, every
site with a figure listed once - over 512 sites whose figures tie often and
span four bytes (tests/progs/rt_sites.c)."""
from conftest import device


def ordered(rows, figure):
    keys = [(-r[figure], r["stack"]) for r in rows]
    return keys == sorted(keys) and len(set(k[1] for k in keys)) == len(keys)


def test_sites_are_listed_largest_first_then_by_stack(run):
    snap = run(["rt_sites"], env={"SIMCUDA_MEMORY": "64GiB"}).only()
    d = device(snap)
    live, peak, churn = d["live"], d["at_peak"], d["churn"]
    assert len(churn) == 512, len(churn)
    # a site that freed its only block (k % 21 == 0) holds nothing now
    assert len(live) == 512 - len(range(0, 512, 21)) and len(peak) == 512
    assert ordered(live, "bytes") and ordered(peak, "bytes")
    assert ordered(churn, "allocs")
    # ties and spread are there, so the order was put to the test
    assert len({r["bytes"] for r in live}) >= 7 > 0
    assert len({r["allocs"] for r in churn}) == 7
    assert [r["stack"] for r in live] != [r["stack"] for r in peak]
    assert max(r["bytes"] for r in live) >= 1 << 24
