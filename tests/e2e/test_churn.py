"""Per-call-site churn: allocations, frees, bytes allocated and
temporary frees (freed with no other allocation in between, heaptrack's
definition), checked against a program that knows its own counts
(tests/progs/rt_churn.c), in the snapshot, report --json and the text."""
import json

from conftest import MiB, cli


def test_counts_per_site(run):
    r = run(["rt_churn"])
    snap = r.only("exit")
    rows = snap["devices"][0]["churn"]
    # temporary_site and kept_site are static: the report names them from
    # debug information.
    m = json.loads(cli("report", "--json", r.files[0]).stdout)["snapshots"][0]
    churn = {c["site"].split("!")[1].split(" ")[0]: c for c in m["devices"][0]["churn"]}
    assert churn["temporary_site"] == dict(churn["temporary_site"], allocs=10, frees=10,
                                           bytes_allocated=10 * MiB, temporary=10)
    assert churn["kept_site"] == dict(churn["kept_site"], allocs=5, frees=3,
                                      bytes_allocated=10 * MiB, temporary=0)
    assert [x["allocs"] for x in rows] == [10, 5]  # most allocations first
    dev = snap["devices"][0]["by_kind"]["device"]
    assert sum(x["allocs"] for x in rows) == dev["allocs"]
    assert sum(x["frees"] for x in rows) == dev["frees"]


def test_report_shows_and_sorts_the_churn(run):
    r = run(["rt_churn"])
    text = cli("report", r.files[0]).stdout
    assert "Churn over the run by allocations: 15 allocations, 13 frees (10 temporary)" in text
    table = text.split("Churn over the run")[1].split("Fragmentation")[0]
    rows = [l for l in table.splitlines() if "_site at rt_churn.c:" in l]
    assert "temporary_site" in rows[0] and "kept_site" in rows[1]
    by_temp = cli("report", "--sort", "temporary", r.files[0]).stdout
    rows = [l for l in by_temp.split("Churn over the run")[1].splitlines()
            if "_site at rt_churn.c:" in l]
    assert "temporary_site" in rows[0]
    assert cli("report", "--sort", "size", r.files[0]).returncode == 2


def test_a_run_without_frees_shows_no_churn(run):
    r = run(["rt_symbols"])
    assert "Churn over the run" not in cli("report", r.files[0]).stdout


def test_a_time_window_makes_later_frees_temporary_too(run):
    """CUMEMTRACE_TEMPORARY=1h: kept_site's 3 frees (other allocations came
    between, so not temporary by heaptrack's rule) were within the hour."""
    r = run(["rt_churn"], env={"CUMEMTRACE_TEMPORARY": "1h"})
    snap = r.only("exit")
    assert snap["config"]["temporary_ms"] == 3_600_000
    assert [x["temporary"] for x in snap["devices"][0]["churn"]] == [10, 3]
    text = " ".join(cli("report", r.files[0]).stdout.split())  # wrapped at 80 columns
    assert "Churn over the run by allocations: 15 allocations, 13 frees (13 temporary)" in text
    assert "or within 1h00m (CUMEMTRACE_TEMPORARY)" in text
    m = json.loads(cli("report", "--json", r.files[0]).stdout)["snapshots"][0]
    assert m["config"]["temporary_ms"] == 3_600_000
    # unset: heaptrack's rule alone, and the file says 0
    plain = run(["rt_churn"]).only("exit")
    assert plain["config"]["temporary_ms"] == 0
    assert [x["temporary"] for x in plain["devices"][0]["churn"]] == [10, 0]


def test_a_bad_time_window_is_one_warning(run):
    r = run(["rt_churn"], env={"CUMEMTRACE_TEMPORARY": "soon"})
    warn = [l for l in r.stderr.splitlines() if "CUMEMTRACE_TEMPORARY" in l]
    assert len(warn) == 1 and "expected a duration like" in warn[0], r.stderr
    assert [x["temporary"] for x in r.only("exit")["devices"][0]["churn"]] == [10, 0]
