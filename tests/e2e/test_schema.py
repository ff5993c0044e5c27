"""The snapshot's sections are described once: snapshot.h's SNAP_*_SCHEMA
tables, from which the reader's field tables and `report --json` are made.
Here the writer and docs/snapshot-format.md are held to them: every key the
library writes in a tabled section, over runs that write each kind of
snapshot, is a row, and every row is written; each documented field list is
the table's.  The PyTorch layer's objects (src/torchboot/layer, written
verbatim by the library) are held alike, over real PyTorch runs on the
simulated GPU.  A field added to the writer and not to the table (the reader
would skip it in silence) fails here, and so does a row the writer lost."""
import importlib.util
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import BUILD, PROGS, ROOT, base_env
from needs import TORCH_VENV, needs

READ_DIR = ROOT / "src" / "cli" / "read"
SNAPSHOT_H = (READ_DIR / "snapshot.h").read_text()
# the tables: snapshot.h's, and those beside a reader's own struct
SCHEMA_TEXT = "\n".join(p.read_text() for p in sorted(READ_DIR.glob("snapshot*.[ch]")))
DOC = (ROOT / "docs" / "snapshot-format.md").read_text()
PYTHON = "/usr/bin/python3"


def tables(text=SCHEMA_TEXT):
    """{name: [(key, member, type, json, struct)]} of every SNAP_<name>_SCHEMA."""
    out = {}
    for m in re.finditer(r"^#define SNAP_(\w+)_SCHEMA\(X\)((?:.*\\\n)*.*)", text, re.M):
        out[m.group(1)] = [(k, mem, t, j, st) for st, k, mem, t, j in
                           re.findall(r"X\((\w+), (\w+), ([\w.\[\]]+), (\w+), (\d)\)", m.group(2))]
    return out


TABLES = tables()

# Where each table's object sits in a snapshot ("[]": each element, ".*":
# each member's value).
# host_pinned.by_phase's rows are the devices' (serialise_phases.c writes both).
SECTIONS = {
    "": ["TOP"],
    "process": ["PROCESS"],
    "allocator_refresh": ["REFRESH"],
    "config": ["CONFIG"],
    "config.limit_bytes[]": ["LIMIT"],
    "devices[]": ["DEVICE"],
    "devices[].by_kind.*": ["KIND_STATS"],
    "devices[].vmm": ["VMM"],
    "devices[].fragmentation": ["FRAG"],
    "devices[].histogram[]": ["BUCKET"],
    "devices[].allocator": ["ALLOCATOR"],
    "host_pinned": ["KIND_STATS", "HOST"],
    "counters": ["COUNTERS"],
    "oom": ["OOM"],
    "oom.allocator": ["ALLOCATOR", "ALLOCATOR_OOM"],
    "ooms": ["OOMS"],
    "ooms.attempts[]": ["ATTEMPT"],
    "events": ["EVENTS"],
    "phases": ["PHASES"],
    "phases.list[]": ["PHASE"],
    "phases.ranges": ["PHASES_RANGES"],
    "devices[].by_phase[]": ["PHASE_ROW"],
    "oom.layout": ["LAYOUT"],
    "oom.layout.allocations[]": ["RANGE"],
    "oom.layout.best_free": ["BEST_FREE"],
    "oom.layout.allocator_segments": ["SEGMENTS"],
    "devices[].allocator_segments": ["SEGMENTS"],
    "modules[]": ["MODULE"],
    "stacks[]": ["STACK"],
    "stacks[].frames[]": ["FRAME"],
    "devices[].live[]": ["GROUP_STACK", "GROUP", "GROUP_KIND"],
    "devices[].at_peak[]": ["GROUP_STACK", "GROUP"],
    "devices[].churn[]": ["GROUP_STACK", "CHURN"],
    "host_pinned.live[]": ["GROUP_STACK", "GROUP", "GROUP_KIND"],
    "host_pinned.at_peak[]": ["GROUP_STACK", "GROUP"],
    "oom.live[]": ["GROUP_STACK", "GROUP", "GROUP_KIND"],
    "oom.released[]": ["GROUP_STACK", "GROUP"],
    "devices[].by_phase[].top_at_peak[]": ["GROUP_STACK", "PHASE_TOP"],
    "devices[].allocator_segments.segments[]": ["SEGMENT"],
    "oom.layout.allocator_segments.segments[]": ["SEGMENT"],
    "devices[].allocator_segments.stacks[].[]": ["SEG_FRAME"],
}


# The PyTorch layer's objects, written by src/torchboot/layer/*.py: where
# each table's object sits (the frames of a group's site and stack, a
# series' lines and an origin's forward_site are one shape).
TORCH_SECTIONS = {
    "devices[].tensors": ["TENSORS"],
    "devices[].peak_tensors": ["TENSORS", "PEAK_TENSORS"],
    "oom.allocator.tensors": ["TENSORS"],
    "devices[].tensors.cache": ["TENSORS_CACHE"],
    "oom.allocator.tensors.cache": ["TENSORS_CACHE"],
    "devices[].tensors.groups[]": ["TGROUP"],
    "devices[].peak_tensors.groups[]": ["TGROUP"],
    "oom.allocator.tensors.groups[]": ["TGROUP"],
    "devices[].tensors.groups[].origin": ["ORIGIN"],
    "oom.allocator.origin": ["ORIGIN"],
    "devices[].growth[]": ["GROWTH"],
    "devices[].tensor_series": ["SERIES"],
    "devices[].tensor_series.readings[]": ["SREADING"],
    "devices[].tensor_series.lines[]": ["TFRAME"],
    "devices[].tensors.groups[].site": ["TFRAME"],
    "devices[].tensors.groups[].stack[]": ["TFRAME"],
    "oom.allocator.origin.forward_site": ["TFRAME"],
    "devices[].allocator.roles": ["ROLES"],
    "oom.allocator.roles": ["ROLES"],
    "devices[].allocator.largest_free_block_bytes": ["LARGEST_FREE"],
    "oom.allocator.largest_free_block_bytes": ["LARGEST_FREE"],
    "devices[].allocator.top_tensors[]": ["TOP_TENSOR"],
    "oom.allocator.top_tensors[]": ["TOP_TENSOR"],
    "devices[].allocator.top_tensors[].stack[]": ["TOP_FRAME"],
    "oom.allocator.top_tensors[].stack[]": ["TOP_FRAME"],
    "oom.layout.allocator_segments.stacks[].[]": ["SEG_FRAME"],
}
# tensors.more: the layer folds groups only past thousands of them, which no
# short run makes; held to its table through the layer's own fold below.
TORCH_FOLDED = {"devices[].tensors.more": ["TENSORS_MORE"]}


def keys_of(path):
    names = {**SECTIONS, **TORCH_SECTIONS, **TORCH_FOLDED}[path]
    return [row[0] for name in names for row in TABLES[name]]


def objects(value, path):
    """The objects at path in value (null ones left out); "[]" alone: each
    element of an array that is itself an element."""
    if value is None:
        return []
    if path == "":
        return [value] if isinstance(value, dict) else []
    head, _, rest = path.partition(".")
    if head == "[]":
        return [o for v in value for o in objects(v, rest)]
    if head == "*":
        return [o for v in value.values() for o in objects(v, rest)]
    if head.endswith("[]"):
        return [o for v in value.get(head[:-2]) or [] for o in objects(v, rest)]
    return objects(value.get(head), rest)


def test_the_tables_parse():
    assert len(TABLES) >= 18, sorted(TABLES)
    for name, rows in TABLES.items():
        assert rows, f"SNAP_{name}_SCHEMA has no row this test can read"
        keys = [r[0] for r in rows]
        assert len(keys) == len(set(keys)), f"SNAP_{name}_SCHEMA repeats a key"
    # the rows the regular expression sees are all the rows there are
    for name in TABLES:
        body = re.search(rf"#define SNAP_{name}_SCHEMA\(X\)((?:.*\\\n)*.*)", SCHEMA_TEXT).group(1)
        assert body.count("X(") == len(TABLES[name]), name


def test_every_table_has_its_place():
    placed = {n for sections in (SECTIONS, TORCH_SECTIONS, TORCH_FOLDED)
              for names in sections.values() for n in names}
    unplaced = set(TABLES) - placed
    assert not unplaced, (f"SNAP_*_SCHEMA tables {sorted(unplaced)} have no place in "
                          "SECTIONS: say where their object sits in a snapshot")


def run(tmp_path, name, args, env=None):
    cwd = tmp_path / name
    cwd.mkdir()
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=base_env(env),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(f.read_text()) for f in sorted(cwd.glob("cumemtrace.*.json"))]


def signalled(tmp_path):
    """A snapshot written on SIGTERM (reason "signal")."""
    cwd = tmp_path / "signal"
    cwd.mkdir()
    p = subprocess.Popen([str(PROGS / "rt_hold"), "default"], cwd=cwd, env=base_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=20)
    return [json.loads(f.read_text()) for f in sorted(cwd.glob("cumemtrace.*.json"))]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Snapshots of every reason the library writes, and of every optional
    section: every kind, VMM, an OOM that recovers (attempts, dumps), the
    limit, a mark held at the dump, phases, a signal, Python frames cut by a
    marker, the allocator's figures asked at an API dump and at an OOM
    (stand-ins for PyTorch's layer)."""
    tmp = tmp_path_factory.mktemp("schema")
    card = {"SIMCUDA_MEMORY": "256MiB"}
    snaps = run(tmp, "kinds", [PROGS / "drv_workload", "kinds"])
    snaps += run(tmp, "vmm", [PROGS / "drv_workload", "vmm"])
    snaps += run(tmp, "recover", [PROGS / "rt_oom", "recover"],
                 dict(card, CUMEMTRACE_OOM_DUMPS="all"))
    snaps += run(tmp, "limit", [PROGS / "rt_oom", "limit"], dict(card, CUMEMTRACE_LIMIT="100MiB"))
    snaps += run(tmp, "mark", [PROGS / "rt_mark", "cumemtrace.mark.json"])
    snaps += run(tmp, "phases", [PROGS / "rt_phases"])
    snaps += signalled(tmp)
    python = ROOT / "tests" / "python"
    snaps += run(tmp, "refresh", [PYTHON, python / "refresh.py", BUILD, "api"])
    snaps += run(tmp, "recursion", [PYTHON, python / "train.py", BUILD, "recursion"])
    snaps += run(tmp, "allocator", [PYTHON, python / "allocator_segments.py", BUILD,
                                    ROOT / "src" / "torchboot"], card)
    reasons = {s["reason"] for s in snaps}
    assert {"exit", "oom", "signal", "api"} <= reasons, reasons
    return snaps


def check_written(snapshots, path, names):
    seen = set()
    for s in snapshots:
        for o in objects(s, path):
            seen |= set(o)
    want = set(keys_of(path))
    names = " + ".join(f"SNAP_{n}_SCHEMA" for n in names)
    assert seen, f"no snapshot here has '{path or 'the top level'}': the runs miss a case"
    assert not seen - want, (f"the library writes {sorted(seen - want)} in "
                             f"'{path or 'the top level'}', which {names} (snapshot.h) "
                             "lacks: add the row, or the reader skips it")
    assert not want - seen, (f"{names} (snapshot.h) has {sorted(want - seen)}, which the "
                             f"library never writes in '{path or 'the top level'}'")


@pytest.mark.parametrize("path", sorted(SECTIONS), ids=lambda p: p or "top")
def test_the_writer_writes_the_tables_keys(written, path):
    check_written(written, path, SECTIONS[path])


TORCH_PY = os.environ.get("CUMEMTRACE_TORCH_PYTHON",
                          os.path.expanduser("~/.cache/cumemtrace/torch-venv/bin/python"))
SCENARIOS = ROOT / "tests" / "torch" / "scenarios"


@pytest.fixture(scope="module")
def torch_written(tmp_path_factory):
    """Snapshots of real PyTorch runs on the simulated GPU (scripts/simgpu):
    an eval pass that leaks a step's logits (tensors, peak_tensors, growth,
    tensor_series, api dumps), gradients made on autograd's thread (a
    group's origin), and an OOM in a node's backward under anomaly mode
    (oom.allocator.tensors, its origin with the forward line)."""
    tmp = tmp_path_factory.mktemp("torch_schema")
    snaps = []
    for name, memory, args in (("tensors_eval_leak.py", "8GiB", []),
                               ("autograd_grads.py", "24GiB", []),
                               ("autograd_node_oom.py", "1536MiB", ["anomaly"])):
        cwd = tmp / name
        cwd.mkdir()
        proc = subprocess.run([str(ROOT / "scripts" / "simgpu"), "--build", str(BUILD),
                               "--memory", memory, "--", str(BUILD / "cumemtrace"), "run",
                               "--output", f"{cwd}/", "--", TORCH_PY, str(SCENARIOS / name),
                               *args], cwd=cwd, env=base_env(), capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        snaps += [json.loads(f.read_text()) for f in sorted(cwd.glob("cumemtrace.*.json"))]
    return snaps


@needs(os.path.exists(TORCH_PY), f"the PyTorch venv's {TORCH_PY}",
       TORCH_VENV + "; CUMEMTRACE_TORCH_PYTHON names another")
@pytest.mark.parametrize("path", sorted(TORCH_SECTIONS))
def test_the_pytorch_layer_writes_the_tables_keys(torch_written, path):
    check_written(torch_written, path, TORCH_SECTIONS[path])


def test_the_pytorch_layers_fold_writes_the_tables_keys():
    spec = importlib.util.spec_from_file_location(
        "layer_tensors", ROOT / "src" / "torchboot" / "layer" / "tensors.py")
    layer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layer)
    t = {"groups": [{"bytes": 2, "count": 1}, {"bytes": 1, "count": 1}], "more": None}
    layer._fold(t, 1)
    check_written([{"devices": [{"tensors": t}]}], "devices[].tensors.more",
                  TORCH_FOLDED["devices[].tensors.more"])


# docs/snapshot-format.md: each section's heading and the tables it
# documents; a section written as a table of fields ("| `key` | ...") lists
# nothing else, bar what the library does not write.
DOC_SECTIONS = {
    "## Top level": ["TOP"],
    "### `process`": ["PROCESS"],
    "### `config`": ["CONFIG"],
    "### `devices[]`": ["DEVICE", "TENSORS", "PEAK_TENSORS", "TENSORS_MORE", "TENSORS_CACHE",
                        "TGROUP", "GROWTH", "ORIGIN", "SERIES", "SREADING", "TFRAME",
                        "GROUP_STACK", "GROUP", "GROUP_KIND", "CHURN", "PHASE_TOP"],
    "### `host_pinned`": ["KIND_STATS", "HOST"],
    "### `counters`": ["COUNTERS"],
    '### `oom` (for `reason: "oom"`)': ["OOM"],
    "#### `oom.allocator`": ["ALLOCATOR", "ALLOCATOR_OOM", "LARGEST_FREE", "ROLES", "TOP_TENSOR",
                             "TOP_FRAME"],
    "### `ooms`": ["OOMS"],
    "### `events`": ["EVENTS"],
    "### `phases`": ["PHASES"],
    "#### `oom.layout`": ["LAYOUT", "SEGMENTS", "SEGMENT", "SEG_FRAME"],
    "### `modules[]`": ["MODULE"],
    "### `stacks[]`": ["STACK", "FRAME"],
}
DOC_ONLY = {"## Top level": {"recovered"}}  # the command's own, on a stream it recovers
# Objects documented inline, as `{a, b, ...}` after their key in a section.
DOC_LISTS = [("## Top level", "allocator_refresh", "REFRESH"),
             ("### `config`", "limit_bytes", "LIMIT"),
             ("### `devices[]`", "by_kind", "KIND_STATS"),
             ("### `devices[]`", "vmm", "VMM"),
             ("### `devices[]`", "histogram", "BUCKET"),
             ("### `devices[]`", "fragmentation", "FRAG"),
             ("### `devices[]`", "tensors", "TENSORS"),
             ("### `devices[]`", "groups", "TGROUP"),
             ("### `devices[]`", "cache", "TENSORS_CACHE"),
             ("### `devices[]`", "origin", "ORIGIN"),
             ("### `devices[]`", "site", "TFRAME"),
             ("### `devices[]`", "growth", "GROWTH"),
             ("### `devices[]`", "tensor_series", "SERIES"),
             ("### `devices[]`", "readings", "SREADING"),
             ("### `ooms`", "attempts", "ATTEMPT"),
             ("### `phases`", "list", "PHASE"),
             ("### `phases`", "ranges", "PHASES_RANGES"),
             ("#### `oom.layout`", "allocations", "RANGE"),
             ("#### `oom.layout`", "best_free", "BEST_FREE"),
             ("#### `oom.layout`", "stacks", "SEG_FRAME")]


def doc_section(heading):
    start = DOC.index("\n" + heading + "\n")
    end = re.compile(r"^#{2,4} ", re.M).search(DOC, start + len(heading) + 2)
    return DOC[start:end.start() if end else len(DOC)]


def written_keys(names):
    return [r[0] for n in names for r in TABLES[n]]


@pytest.mark.parametrize("heading", DOC_SECTIONS)
def test_the_docs_describe_every_key(heading):
    text = doc_section(heading)
    names = DOC_SECTIONS[heading]
    said = set(re.findall(r"`(\w+)`", text))  # a key, or a key in an object `{a, b}`
    said |= {w for obj in re.findall(r"`\[*\{([^}`]*)\}", text) for w in re.findall(r"(\w+)", obj)}
    missing = [k for k in written_keys(names) if k not in said]
    assert not missing, (f"docs/snapshot-format.md '{heading}' does not describe "
                         f"{missing}, which " + " + ".join(f"SNAP_{n}_SCHEMA" for n in names)
                         + " (snapshot.h) has")
    listed = {k for cell in re.findall(r"^\| ([^|]+) \|", text, re.M)
              for k in re.findall(r"`(\w+)`", cell)} - {"field"}
    extra = listed - set(written_keys(names)) - DOC_ONLY.get(heading, set())
    assert not extra, (f"docs/snapshot-format.md '{heading}' documents {sorted(extra)}, "
                       "which no table of snapshot.h has")


@pytest.mark.parametrize("heading,key,name", DOC_LISTS, ids=[k for _, k, _ in DOC_LISTS])
def test_the_docs_inline_lists_are_the_tables(heading, key, name):
    text = doc_section(heading)
    row = re.search(rf"^\| `{key}` \|.*$", text, re.M)  # its row, else the prose after it
    m = re.search(rf"`{key}`[^{{]*?`\[*\{{([\w, ]+)\}}", row.group(0) if row else text)
    assert m, f"docs/snapshot-format.md '{heading}' gives no {{...}} list for `{key}`"
    assert sorted(m.group(1).replace(" ", "").split(",")) == sorted(written_keys([name])), \
        f"docs/snapshot-format.md's `{key}` lists {m.group(1)}, SNAP_{name}_SCHEMA other keys"


READERS = {p.name: p.read_text() for p in (ROOT / "src" / "cli" / "read").glob("*.c")}
REPORT_JSON = "".join((ROOT / "src" / "cli" / "views" / n).read_text()
                      for n in ("report_json.c", "report_json_holders.c"))


def test_no_tabled_field_is_named_by_hand():
    """A tabled section's fields come from its table only (docs/design.md,
    "Adding a snapshot field": the row is all the reader and report --json
    need)."""
    tabled = {r[4] for rows in TABLES.values() for r in rows}
    for name, text in READERS.items():
        hand = set(re.findall(r"\bFIELD\((\w+),", text)) | \
            set(re.findall(r'\bFIELD_AT\("[^"]*", (\w+),', text))
        assert not hand & tabled, (f"src/cli/read/{name} names fields of {sorted(hand & tabled)} "
                                   "by hand: they are rows of snapshot.h's tables")
    for table, rows in TABLES.items():
        use = f"SNAP_{table}_SCHEMA("
        assert any(use in t for t in READERS.values()), f"no reader expands SNAP_{table}_SCHEMA"
        if any(r[3] != "0" for r in rows):
            assert use in REPORT_JSON, (f"SNAP_{table}_SCHEMA has rows report --json prints, "
                                        "but report_json*.c does not expand it")
