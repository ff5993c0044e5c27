"""Kinds and causes are rows.  What docs/design.md says a new out-of-memory
cause touches is all that names one: a cause is its row in
src/cli/text/oom_causes.c (the build makes format.h's list from the rows)
and the code that decides it, so a view that branches on a cause by name
(`o->cause == CAUSE_LIMIT`) instead of reading the row fails here, and so
does a list of causes kept anywhere else.  No code tests a kind by name
(`kind == KIND_HOST_PINNED`): it asks format.h's columns
(FORMAT_KIND_ON_HOST...), and a kind's symbol appears only in the files
docs/design.md lists for a new kind, besides the few kinds that have a
section or a figure of their own (ROLES)."""
import re

from conftest import BUILD, ROOT

RUNS_NO_C = True  # reads src/ and the build's generated lists

FORMAT_H = (ROOT / "src" / "common" / "format.h").read_text()
DESIGN = (ROOT / "docs" / "design.md").read_text()
CAUSES_C = ROOT / "src" / "cli" / "text" / "oom_causes.c"
CAUSE_ROWS = re.findall(r'^ +CAUSE\((\w+), ("\w+")', CAUSES_C.read_text(), re.M)
CAUSES = [sym for sym, _ in CAUSE_ROWS]
KINDS = re.findall(r'X\((\w+), "\w+", [01], [01], [01], "[^"]*"\)', FORMAT_H)


def listed(heading):
    """The src/ files a "what you touch" list of docs/design.md names."""
    m = re.search(rf"^{re.escape(heading)}[^\n]*\n(.*?)(?:\n\n|\Z)", DESIGN, re.S | re.M)
    assert m, f"docs/design.md has no list '{heading}'"
    return set(re.findall(r"`(src/[\w/.]+\.[ch])`", m.group(1)))


def naming(pattern, code_only=False):
    """The src/ files whose text matches pattern (with code_only, outside
    comments), relative to the root."""
    hits = set()
    for p in sorted((ROOT / "src").rglob("*.[ch]")):
        text = p.read_text(errors="replace")
        if code_only:
            text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        if re.search(pattern, text):
            hits.add(str(p.relative_to(ROOT)))
    return hits


def test_the_cause_table_parses():
    assert CAUSES[:2] == ["EXHAUSTED", "REFUSED_WHILE_FREE"] and len(CAUSES) >= 7


def test_only_the_listed_files_name_a_cause():
    allowed = listed("Adding an out-of-memory cause")
    assert "src/cli/text/oom_causes.c" in allowed
    symbols = "|".join(CAUSES)
    found = naming(rf"\b(?:FORMAT_)?CAUSE_(?:{symbols})\b")
    assert found - allowed == set(), (
        "these files branch on a cause by name; read its row (oom_causes.h) or list "
        f"them in docs/design.md: {sorted(found - allowed)}")


def test_the_build_lists_the_rows():
    """format.h's FORMAT_CAUSES is made from the rows and from nothing else:
    the generated list is the rows' first two columns, in their order, and
    no file under src/ spells a list of causes of its own."""
    made = (BUILD / "gen" / "causes.h").read_text()
    assert re.findall(r'X\((\w+), ("\w+")\)', made) == CAUSE_ROWS
    assert "#include \"causes.h\"" in FORMAT_H
    names = "|".join(re.escape(n) for _, n in CAUSE_ROWS)
    lists = naming(rf'X\(\w+, (?:{names})\)') - {str(CAUSES_C.relative_to(ROOT))}
    assert lists == set(), f"these files keep a list of causes of their own: {sorted(lists)}"


def test_a_new_cause_is_its_row_and_its_decision():
    """The list docs/design.md gives for a new cause names its row and the
    code that decides it; format.h, which only includes the made list, is
    not among them."""
    allowed = listed("Adding an out-of-memory cause")
    assert "src/common/format.h" not in allowed
    assert {"src/cli/text/oom_causes.c", "src/preload/oom/oom_ledger.c",
            "src/preload/track/allocator.c"} <= allowed


def test_no_code_tests_a_kind_by_name():
    assert KINDS[0] == "DEVICE" and "HOST_PINNED" in KINDS
    k = "|".join(KINDS)
    pattern = rf"(?:[=!]=\s*KIND_(?:{k})\b|\bKIND_(?:{k})\s*[=!]=|case\s+KIND_(?:{k})\b)"
    found = naming(pattern)
    assert found == set(), (
        "these files test a kind by name; ask a column of format.h's FORMAT_KINDS "
        f"(or add one): {sorted(found)}")


# Kinds with a part of the format or the tracker of their own, where code
# names them: the device kind keys the device's pool (record_pool_of) and is
# what the reader assumes of a group without a kind; VMM handles' physical
# bytes are a figure of the device's vmm object; pinned host memory has its
# own section, host_pinned, and the hyphenated spelling the CLI accepts.
ROLES = {
    "DEVICE": {"src/cli/model/holders.c", "src/cli/views/html_model.c",
               "src/cli/read/snapshot_layout.c", "src/cli/read/snapshot_sections.c",
               "src/preload/oom/oom.c", "src/preload/track/record_vmm.c",
               "src/preload/track/record_fast.h", "src/preload/track/record_view.c",
               "src/preload/track/record_peak.c"},
    "VMM": {"src/preload/write/serialise.c", "src/preload/track/record_vmm.c"},
    "HOST_PINNED": {"src/preload/write/serialise.c", "src/cli/read/snapshot.c"},
}


def test_a_kind_is_named_only_where_design_says():
    """A kind's symbol, in code, appears only in the files docs/design.md
    lists for a new kind (its row, the wrappers that allocate it) and in
    the parts of its own above: a new kind named anywhere else is a file
    the list does not say it touches."""
    allowed = listed("Adding an allocation kind")
    assert "src/common/format.h" in allowed, allowed
    wrappers = {f"src/preload/interpose/hooks_{w}.c" for w in ("driver", "runtime", "vmm")}
    for k in KINDS:
        found = naming(rf"\b(?:FORMAT_KIND_INDEX_|KIND_){k}\b", code_only=True)
        extra = found - allowed - wrappers - ROLES.get(k, set())
        assert extra == set(), (
            f"KIND_{k} is named in {sorted(extra)}: ask a column of FORMAT_KINDS, or "
            "say in docs/design.md's list for a new kind why it touches them")


def test_two_makes_at_once_on_one_tree_both_make_the_list(tmp_path):
    """CI runs `make test` and `make test-torch` side by side on one build
    tree; each make writes format.h's list of causes while it reads the
    Makefile, so one sharing a temporary file with the other fails."""
    import subprocess
    build = tmp_path / "b"
    procs = [subprocess.Popen(["make", "-n", "-C", str(ROOT), f"BUILD={build}", "all"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(16)]
    errors = [p.communicate()[1] for p in procs if p.wait() != 0]
    assert errors == [], errors[:1]
    assert (build / "gen" / "causes.h").read_text() == (BUILD / "gen" / "causes.h").read_text()
    assert [p.name for p in (build / "gen").iterdir()] == ["causes.h"]
