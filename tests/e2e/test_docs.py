"""The README and docs/ as a reader meets them: the README starts with the
two commands that work on a fresh machine and fits in 250 lines, every link
between the pages leads somewhere, and no page cites a tracker the reader of
the repository does not have."""
import re

from conftest import ROOT

RUNS_NO_C = True  # reads the README and docs/

PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def test_the_readme_starts_with_the_demo_and_the_tests_and_stays_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)
    commands = [l.split("#")[0].strip() for l in lines[1:5] if l.startswith("    ")]
    assert commands == ["make demo", "make test"], lines[:5]


def slug(heading):
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {slug(l.lstrip("#")) for l in text.splitlines() if re.match(r"#{1,6} ", l)}


def test_every_link_between_the_pages_leads_somewhere():
    bad = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{page.name}: {target} (no such heading)")
    assert not bad, "\n".join(bad)


def test_no_page_cites_an_issue_number_of_this_project():
    """Another project's issue, cited as owner/repo#N, is a source and
    stays; the word issue with a bare number is this project's tracker,
    which a reader of the repository does not have: the page must say the
    reason in words."""
    found = []
    for page in PAGES:
        text = " ".join(page.read_text().split())
        for m in re.finditer(r"(\S+ )?\bissues? #?\d+", text, re.I):
            owner = (m.group(1) or "").strip()
            if "/" in owner or owner.endswith(".jl"):
                continue
            found.append(f"{page.name}: ...{text[max(0, m.start() - 40):m.end()]}")
    assert not found, "\n".join(found)


def test_no_table_cell_is_a_page_of_its_own():
    """A field whose meaning runs past a screen gets a section of its own
    (as `oom.allocator` and `oom.layout` have), not a 5,000-character cell."""
    long = []
    for page in PAGES:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("|"):
                widest = max(len(c) for c in line.split("|"))
                if widest > 3000:
                    long.append(f"{page.name}:{n}: a cell of {widest} characters")
    assert not long, "\n".join(long)
