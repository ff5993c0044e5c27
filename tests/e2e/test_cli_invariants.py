"""The reader refuses a snapshot that contradicts itself:
each invariant of docs/snapshot-format.md ("Invariants") is broken on its own
in a valid document from the golden generator (tests/golden/gen_inputs.py),
and the CLI must exit 2 with one line naming the file and that invariant."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from needs import needs

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
CLI = BUILD / "cumemtrace"
sys.path.insert(0, str(ROOT / "tests" / "golden"))
import gen_inputs  # noqa: E402

pytestmark = needs(CLI.exists(), f"{CLI}", "make cli builds it")


def dev(d):
    return d["devices"][0]


def m_dup_device(d):
    d["devices"].append(copy.deepcopy(dev(d)))


def m_current_above_sum_of_kinds(d):
    del dev(d)["live"]                      # so no live sum speaks first
    del dev(d)["histogram"]
    dev(d)["by_kind"]["managed"].update(current_bytes=1, peak_bytes=1)


def m_peak_above_kind_peaks(d):
    del dev(d)["at_peak"]
    dev(d)["peak_bytes"] = sum(k["peak_bytes"] for k in dev(d)["by_kind"].values()) + 1


def m_vmm_mapped_above_reserved(d):
    v = dev(d)["vmm"]
    v["mapped_bytes"] = v["mapped_peak_bytes"] = v["reserved_bytes"] + 1


def m_oom_on_exit(d):
    d["oom"] = copy.deepcopy(gen_inputs.oom_exhausted()["oom"])


def m_frag_free_below_request(d):
    o = d["oom"]
    o["free_bytes"] = o["requested_bytes"] - 1
    o["untracked_bytes"] = max(0, o["total_bytes"] - o["free_bytes"] - o["tracked_bytes"])


def m_dup_limit(d):
    d["config"]["limit_bytes"] = [{"device": 0, "bytes": 1 << 30}, {"device": 0, "bytes": 1 << 31}]


EXIT, OOM, FRAG = gen_inputs.exit_train, gen_inputs.oom_exhausted, gen_inputs.oom_fragmentation
T_EXIT, T_OOM = gen_inputs.tensors_exit, gen_inputs.tensors_oom
T_SUM = "tensors: groups and more sum to allocated_bytes and count"
T_ALLOC = "tensors: allocated_bytes is the allocator's"


def m_more_uncounted(d):
    t = dev(d)["tensors"]
    t["more"] = {"groups": 3, "bytes": 4096, "count": 3}


def m_more_counted(d):
    t = dev(d)["tensors"]
    t["more"] = {"groups": 3, "bytes": 4096, "count": 3}
    t["allocated_bytes"] += 4096
    t["count"] += 3
    dev(d)["allocator"]["allocated_bytes"] += 4096
# (name, document, mutation, the invariant the message must name)
CASES = [
    ("negative ordinal", EXIT, lambda d: dev(d).update(ordinal=-1),
     "ordinals are unique and non-negative"),
    ("duplicate ordinal", EXIT, m_dup_device, "ordinals are unique and non-negative"),
    ("current above peak", EXIT, lambda d: dev(d).update(current_bytes=dev(d)["peak_bytes"] + 1),
     "current <= peak"),
    ("free above total", EXIT, lambda d: dev(d).update(free_bytes=dev(d)["total_bytes"] + 1),
     "free <= total"),
    ("at_peak past the peak", EXIT, lambda d: dev(d)["at_peak"][0].update(
        bytes=dev(d)["at_peak"][0]["bytes"] * 10**6), "at_peak sums to peak_bytes"),
    ("at_peak one byte short", EXIT, lambda d: dev(d)["at_peak"][0].update(
        bytes=dev(d)["at_peak"][0]["bytes"] - 1), "at_peak sums to peak_bytes"),
    ("live past current", EXIT, lambda d: dev(d)["live"][0].update(
        bytes=dev(d)["live"][0]["bytes"] + 1), "live sums to current_bytes"),
    ("kind current above its peak", EXIT, lambda d: dev(d)["by_kind"]["managed"].update(
        current_bytes=1), "current <= peak"),
    ("frees above allocs", EXIT, lambda d: dev(d)["by_kind"]["device"].update(
        frees=dev(d)["by_kind"]["device"]["allocs"] + 1), "frees <= allocs"),
    ("live of the wrong kind", EXIT, lambda d: dev(d)["live"][0].update(kind="managed"),
     "live by kind sums to by_kind current_bytes"),
    ("current not the sum of kinds", EXIT, m_current_above_sum_of_kinds,
     "current_bytes is the sum of by_kind"),
    ("a kind peaks above the device", EXIT, lambda d: dev(d)["by_kind"]["managed"].update(
        peak_bytes=dev(d)["peak_bytes"] + 1), "no kind peaks above the device"),
    ("device peak above its kinds", EXIT, m_peak_above_kind_peaks,
     "the device peaks at most at the sum of its kinds' peaks"),
    ("vmm reserved above its peak", EXIT, lambda d: dev(d)["vmm"].update(
        reserved_bytes=dev(d)["vmm"]["reserved_peak_bytes"] + 1), "current <= peak"),
    ("vmm mapped above reserved", EXIT, m_vmm_mapped_above_reserved, "mapped <= reserved"),
    ("rounded below requested", EXIT, lambda d: dev(d)["fragmentation"].update(
        rounded_bytes=dev(d)["fragmentation"]["requested_bytes"] - 1),
     "requested <= rounded, small <= requested"),
    ("histogram off the live set", EXIT, lambda d: dev(d)["histogram"][0].update(
        count=dev(d)["histogram"][0]["count"] + 1), "the histogram counts the live allocations"),
    ("host at_peak past its peak", EXIT, lambda d: d["host_pinned"]["at_peak"][0].update(
        bytes=d["host_pinned"]["at_peak"][0]["bytes"] + 1), "at_peak sums to peak_bytes"),
    ("host current above its peak", EXIT, lambda d: d["host_pinned"].update(
        current_bytes=d["host_pinned"]["peak_bytes"] + 1), "current <= peak"),
    ("oom object in an exit dump", EXIT, m_oom_on_exit,
     'oom is present exactly when reason is "oom"'),
    ("oom dump without oom", OOM, lambda d: d.update(oom=None),
     'oom is present exactly when reason is "oom"'),
    ("oom on an unlisted device", OOM, lambda d: d["oom"].update(device=5),
     "oom.device is -1 or a listed device"),
    ("oom kinds off tracked", OOM, lambda d: d["oom"]["by_kind"].update(
        device=d["oom"]["by_kind"]["device"] + 1), "oom.by_kind sums to tracked_bytes"),
    ("untracked off", OOM, lambda d: d["oom"].update(untracked_bytes=d["oom"]["untracked_bytes"] + 1),
     "untracked = total - free - tracked, floored at 0"),
    ("shortfall off", OOM, lambda d: d["oom"].update(shortfall_bytes=d["oom"]["shortfall_bytes"] + 1),
     "exhausted: free < requested, shortfall = requested - free"),
    ("fragmentation with free below request", FRAG, m_frag_free_below_request,
     "refused_while_free: free >= requested"),
    ("more recoveries than ooms", EXIT, lambda d: d["ooms"].update(recovered=d["ooms"]["count"] + 1),
     "recovered <= count <= failed_attempts"),
    ("live_allocations off", EXIT, lambda d: d["counters"].update(
        live_allocations=d["counters"]["live_allocations"] + 1),
     "live_allocations counts the live groups"),
    ("two limits for one device", EXIT, m_dup_limit, "one limit per device"),
    ("more events than recorded", EXIT, lambda d: d["events"].update(recorded=1),
     "events kept <= recorded"),
    ("tensor groups past allocated_bytes", T_EXIT,
     lambda d: dev(d)["tensors"]["groups"][0].update(bytes=dev(d)["tensors"]["groups"][0]["bytes"] + 1),
     T_SUM),
    ("tensor groups off the count", T_EXIT,
     lambda d: dev(d)["peak_tensors"]["groups"][0].update(count=1), T_SUM),
    ("more not counted", T_EXIT, m_more_uncounted, T_SUM),
    ("oom tensors one byte short", T_OOM,
     lambda d: d["oom"]["allocator"]["tensors"]["groups"][-1].update(bytes=1 << 21 - 1), T_SUM),
    ("tensors off the allocator", T_EXIT,
     lambda d: dev(d)["allocator"].update(allocated_bytes=dev(d)["allocator"]["allocated_bytes"] - 1),
     T_ALLOC),
    ("peak tensors off max_memory_allocated", T_EXIT,
     lambda d: dev(d)["allocator"].update(peak_allocated_bytes=dev(d)["allocator"]["peak_allocated_bytes"] + 1),
     T_ALLOC),
    ("oom tensors off the failure's allocator", T_OOM,
     lambda d: d["oom"]["allocator"].update(allocated_bytes=d["oom"]["allocator"]["allocated_bytes"] + 1),
     T_ALLOC),
]


def report(path):
    return subprocess.run([str(CLI), "report", str(path)], capture_output=True, text=True,
                          env=dict(os.environ, NO_COLOR="1"), timeout=60)


def test_more_counted_is_read(tmp_path):
    doc = T_EXIT()
    m_more_counted(doc)
    p = tmp_path / "more.json"
    p.write_text(json.dumps(doc))
    r = report(p)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("make", [EXIT, OOM, FRAG, T_EXIT, T_OOM], ids=lambda f: f.__name__)
def test_the_unbroken_documents_are_read(make, tmp_path):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(make()))
    r = report(p)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name,make,mutate,rule", CASES, ids=[c[0] for c in CASES])
def test_each_broken_invariant_is_named(name, make, mutate, rule, tmp_path):
    doc = make()
    mutate(doc)
    p = tmp_path / "contradictory.json"
    p.write_text(json.dumps(doc))
    r = report(p)
    assert r.returncode == 2, r.stdout
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"cumemtrace: cannot read snapshot '{p}': breaks the "
                               f'invariant "{rule}": '), r.stderr


def test_a_file_cut_short_is_truncated_not_contradictory(tmp_path):
    doc = EXIT()
    dev(doc)["at_peak"][0]["bytes"] *= 10**6
    text = json.dumps(doc, indent=1)
    p = tmp_path / "cut.json"
    p.write_text(text[:len(text) - 40])
    r = report(p)
    assert r.returncode == 2 and "truncated" in r.stderr, r.stderr


def test_missing_arrays_are_unknown_not_contradictions(tmp_path):
    # A hand-written file may leave out what it does not know (docs/cli.md).
    doc = {"format": "cumemtrace", "version": 1, "reason": "exit",
           "devices": [{"ordinal": 0, "current_bytes": 10, "peak_bytes": 100}]}
    p = tmp_path / "sparse.json"
    p.write_text(json.dumps(doc))
    r = report(p)
    assert r.returncode == 0, r.stderr
