"""PyTorch's allocated bytes by role (allocator.roles, docs/snapshot-format.md):
the report's roles line, report --json, the optimizer-state advice, the
check that refuses roles that do not add up, and the HTML page's stacked
bar - on a golden post-mortem given the allocator figures PyTorch's layer
writes.  tests/torch/test_roles.py measures them on real PyTorch."""
import json

import pytest

from conftest import ROOT, cli
from test_html import browser, html, open_page  # noqa: F401 (the fixture)

INPUTS = ROOT / "tests" / "golden" / "inputs"
MiB = 1 << 20
GiB = 1 << 30


def doc_with_roles(roles, allocated, optimizers="AdamW"):
    doc = json.loads((INPUTS / "oom_fragmentation.json").read_text())
    doc["oom"]["allocator"] = {
        "name": "pytorch", "version": "2.15.0", "requested_bytes": doc["oom"]["requested_bytes"],
        "allocated_bytes": allocated, "reserved_bytes": allocated + 2 * GiB,
        "active_bytes": allocated, "reserved_unallocated_bytes": 2 * GiB,
        "inactive_split_bytes": 0, "segments": 37, "num_alloc_retries": 1, "num_ooms": 1,
        "limit_bytes": None, "device_total_bytes": 24 * GiB, "device_free_bytes": 0,
        "largest_free_block_bytes": {"small": 1 << 20, "large": 380 << 20}, "config": {},
        "roles": dict(roles, optimizers=optimizers)}
    return doc


ROLES = {"parameters": 2 * GiB, "buffers": 0, "gradients": 2 * GiB,
         "optimizer_state": 4 * GiB + 200 * MiB, "other": 3 * GiB}
ALLOCATED = sum(ROLES.values())


def write(tmp_path, doc, name="roles.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_report_prints_the_roles_and_the_optimizer_advice(tmp_path):
    r = cli("report", write(tmp_path, doc_with_roles(ROLES, ALLOCATED)))
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert ("roles: 11.2 GiB allocated = parameters 2.00 GiB + gradients 2.00 GiB + "
            "AdamW state 4.20 GiB + other 3.00 GiB (activations, inputs); cache 2.00 GiB"
            ) in text, r.stdout
    assert "AdamW state is 4.20 GiB, 37.5% of what PyTorch's tensors held at the failure, " \
        "2.1x the parameters' 2.00 GiB: an 8-bit optimizer" in text, r.stdout


def test_no_optimizer_advice_when_its_state_is_small(tmp_path):
    roles = dict(ROLES, optimizer_state=1 * GiB, other=10 * GiB)
    r = cli("report", write(tmp_path, doc_with_roles(roles, sum(roles.values()))))
    assert r.returncode == 0, r.stderr
    assert "optimizer state" not in r.stdout and "8-bit" not in r.stdout
    assert "AdamW state 1.00 GiB" in " ".join(r.stdout.split())


def test_report_json_has_the_roles(tmp_path):
    r = cli("report", "--json", write(tmp_path, doc_with_roles(ROLES, ALLOCATED)))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["snapshots"][0]["oom"]["roles"]
    assert got == dict(ROLES, cache=2 * GiB, optimizers="AdamW")


def test_roles_that_do_not_add_up_are_refused(tmp_path):
    r = cli("report", write(tmp_path, doc_with_roles(ROLES, ALLOCATED + 512)))
    assert r.returncode != 0
    assert "roles sum to allocated_bytes" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_without_roles_nothing_is_printed(tmp_path):
    doc = doc_with_roles(ROLES, ALLOCATED)
    doc["oom"]["allocator"]["roles"] = None
    r = cli("report", write(tmp_path, doc))
    assert r.returncode == 0, r.stderr
    assert "roles:" not in r.stdout


def test_html_draws_the_roles_as_a_stacked_bar(browser, tmp_path):  # noqa: F811
    src = write(tmp_path, doc_with_roles(ROLES, ALLOCATED))
    open_page(browser, html(tmp_path / "roles.html", src), "html_roles.png")
    got = browser.eval("""[...document.querySelectorAll('#roles svg.roles-bar rect.role')]
        .map(r => [r.dataset.role, +r.dataset.bytes])""")
    assert got == [["parameters", 2 * GiB], ["gradients", 2 * GiB],
                   ["optimizer state", 4 * GiB + 200 * MiB], ["other tensors", 3 * GiB],
                   ["cache", 2 * GiB]]
    widths = browser.eval("""[...document.querySelectorAll('#roles rect.role')]
        .map(r => +r.getAttribute('width'))""")
    assert widths[2] == pytest.approx(widths[0] * (4 * GiB + 200 * MiB) / (2 * GiB), rel=1e-6)
