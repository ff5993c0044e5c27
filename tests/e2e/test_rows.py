"""Kinds and causes are rows.  What docs/design.md says a new out-of-memory
cause touches is all that names one: a view that branches on a cause by
name (`o->cause == CAUSE_LIMIT`) instead of reading the cause's row in
src/cli/text/oom_causes.c fails here, and so does a cause in format.h's
table without its row.  No code tests a kind by name (`kind ==
KIND_HOST_PINNED`): it asks format.h's columns (FORMAT_KIND_ON_HOST...),
so that a new kind is a line of the table."""
import re

from conftest import ROOT

FORMAT_H = (ROOT / "src" / "common" / "format.h").read_text()
DESIGN = (ROOT / "docs" / "design.md").read_text()
CAUSES = re.findall(r'X\((\w+), "\w+"\)', FORMAT_H)
KINDS = re.findall(r'X\((\w+), "\w+", [01], [01], [01], "[^"]*"\)', FORMAT_H)


def listed(heading):
    """The src/ files a "what you touch" list of docs/design.md names."""
    m = re.search(rf"^{re.escape(heading)}\n(.*?)(?:\n\n|\Z)", DESIGN, re.S | re.M)
    assert m, f"docs/design.md has no list '{heading}'"
    return set(re.findall(r"`(src/[\w/.]+\.[ch])`", m.group(1)))


def naming(pattern):
    """The src/ files whose text matches pattern, relative to the root."""
    hits = set()
    for p in sorted((ROOT / "src").rglob("*.[ch]")):
        if re.search(pattern, p.read_text(errors="replace")):
            hits.add(str(p.relative_to(ROOT)))
    return hits


def test_the_cause_table_parses():
    assert CAUSES[:2] == ["EXHAUSTED", "REFUSED_WHILE_FREE"] and len(CAUSES) >= 7


def test_only_the_listed_files_name_a_cause():
    allowed = listed("Adding an out-of-memory cause:")
    assert "src/cli/text/oom_causes.c" in allowed
    symbols = "|".join(CAUSES)
    found = naming(rf"\b(?:FORMAT_)?CAUSE_(?:{symbols})\b")
    assert found - allowed == set(), (
        "these files branch on a cause by name; read its row (oom_causes.h) or list "
        f"them in docs/design.md: {sorted(found - allowed)}")


def test_every_cause_has_its_row():
    rows = (ROOT / "src" / "cli" / "text" / "oom_causes.c").read_text()
    missing = [c for c in CAUSES if not re.search(rf"\[CAUSE_{c}\] = \{{", rows)]
    assert missing == [], f"causes without a row in oom_causes.c: {missing}"


def test_no_code_tests_a_kind_by_name():
    assert KINDS[0] == "DEVICE" and "HOST_PINNED" in KINDS
    k = "|".join(KINDS)
    pattern = rf"(?:[=!]=\s*KIND_(?:{k})\b|\bKIND_(?:{k})\s*[=!]=|case\s+KIND_(?:{k})\b)"
    found = naming(pattern)
    assert found == set(), (
        "these files test a kind by name; ask a column of format.h's FORMAT_KINDS "
        f"(or add one): {sorted(found)}")
