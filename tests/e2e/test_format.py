"""One vocabulary (src/common/format.h): the library writes and the command
reads the kinds, the versions and the stream's magic from the same table.
A name on one side only fails here: a kind the table lists but the writer
leaves out (as the by_kind loop that stopped at KIND_HOST_PINNED would for a
kind added after it) or the reader does not read back with the same figures,
a version or magic spelled twice."""
import json
import re
import subprocess

from conftest import CLI, LIB, ROOT, device

FORMAT_H = (ROOT / "src" / "common" / "format.h").read_text()
VERSION_H = (ROOT / "include" / "cumemtrace.h").read_text()
KINDS = [(sym, name, dev == "1")
         for sym, name, dev in re.findall(r'X\((\w+), "(\w+)", ([01]), [01], [01], "[^"]*"\)', FORMAT_H)]
ON_DEVICE = [name for _, name, dev in KINDS if dev]
OFF_DEVICE = [name for _, name, dev in KINDS if not dev]
FIGURES = ("current_bytes", "peak_bytes", "peak_time_ns", "allocs", "frees", "failures")


def define(name, text=FORMAT_H):
    m = re.search(rf"^#define {name} (\S+)", text, re.M)
    assert m, f"{name} is not defined"
    return m.group(1)


def test_the_table_parses():
    assert [n for _, n, _ in KINDS] == ["device", "managed", "async", "vmm", "host_pinned"]
    assert ON_DEVICE == [n for _, n, _ in KINDS][:len(ON_DEVICE)]  # device kinds first


def snapshots(run):
    """One snapshot with every kind but VMM, one with VMM memory."""
    return [run(["drv_workload", "kinds"]).only("exit"),
            run(["drv_workload", "vmm"]).only("exit")]


def test_every_kind_is_written(run):
    snaps = snapshots(run)
    written, peaked = set(), set()
    for s in snaps:
        by_kind = device(s)["by_kind"]
        assert list(by_kind) == ON_DEVICE, "by_kind keys are not format.h's device kinds"
        peaked |= {k for k, v in by_kind.items() if v["peak_bytes"] > 0}
        for name in OFF_DEVICE:
            assert name in s, f"no '{name}' section"
            if s[name]["peak_bytes"] > 0:
                peaked.add(name)
        col = s["events"]["columns"].index("kind")
        written |= {row[col] for row in s["events"]["data"]}
    names = {n for _, n, _ in KINDS}
    assert peaked == names, f"kinds never seen with memory: {names - peaked}"
    assert written == names, f"event kinds {written} are not format.h's {names}"


def test_every_kind_is_read_back(run, tmp_path):
    for s in snapshots(run):
        path = tmp_path / "s.json"
        path.write_text(json.dumps(s))
        out = subprocess.run([str(CLI), "report", "--json", str(path)],
                             capture_output=True, text=True, check=True).stdout
        model = json.loads(out)["snapshots"][0]
        read = model["devices"][0]["by_kind"]
        assert list(read) == ON_DEVICE
        for name in ON_DEVICE:
            assert {f: read[name][f] for f in FIGURES} == \
                {f: device(s)["by_kind"][name][f] for f in FIGURES}, name
        for name in OFF_DEVICE:
            assert {f: model[name][f] for f in FIGURES} == {f: s[name][f] for f in FIGURES}


def test_versions_come_from_the_public_header(run):
    want = ".".join(define(f"CUMEMTRACE_VERSION_{p}", VERSION_H)
                    for p in ("MAJOR", "MINOR", "PATCH"))
    snap = run(["drv_workload", "kinds"]).only("exit")
    assert snap["version"] == int(define("FORMAT_VERSION"))
    assert snap["process"]["tool_version"] == want
    out = subprocess.run([str(CLI), "--version"], capture_output=True, text=True).stdout
    assert out.startswith(f"cumemtrace {want} (snapshot format {define('FORMAT_VERSION')})")
    made = subprocess.run(["make", "-s", "-C", str(ROOT), "version"], capture_output=True,
                          text=True, check=True).stdout
    assert made == want + "\n"
    # no version string written out in the sources: each comes from the macros
    for path in list((ROOT / "src" / "preload").rglob("*.c")) + \
            list((ROOT / "src" / "cli").rglob("*.c")):
        assert f'"{want}"' not in path.read_text(), f"{path} spells the version"


def test_stream_magic_is_the_tables():
    magic = define("FORMAT_STREAM_MAGIC").strip('"').encode()
    lib = LIB.read_bytes()
    cli = CLI.read_bytes()
    assert magic in lib and magic in cli
    for path in list((ROOT / "src" / "preload").rglob("*.[ch]")) + \
            list((ROOT / "src" / "cli").rglob("*.[ch]")):
        text = path.read_text()
        assert not re.search(r'#\s*define\s+\w+\s+"CMTSTRM1"', text) and \
            "0x52544d43" not in text, f"{path} spells the stream's magic instead of format.h's"


CAUSES_C = ROOT / "src" / "cli" / "text" / "oom_causes.c"
CAUSES = re.findall(r'^ +CAUSE\((\w+), "(\w+)"', CAUSES_C.read_text(), re.M)


def test_causes_are_the_tables(tmp_path):
    """Each cause in oom_causes.c's rows (format.h's FORMAT_CAUSES) is
    documented, and read back under its own name (an OOM snapshot naming it
    reports it, not "unknown"); neither side spells a cause name outside
    the rows."""
    names = [n for _, n in CAUSES]
    assert names[:3] == ["exhausted", "refused_while_free", "limit"] and "allocator" in names
    doc = (ROOT / "docs" / "snapshot-format.md").read_text()
    for n in names:
        assert f"`{n}`" in doc, f"cause {n} is not in docs/snapshot-format.md"
    for path in list((ROOT / "src" / "preload").rglob("*.c")) + \
            list((ROOT / "src" / "cli").rglob("*.c")):
        if path == CAUSES_C:
            continue
        text = path.read_text()
        for n in names:
            assert f'"{n}"' not in text or n in ("limit", "allocator", "exhausted"), \
                f"{path} spells cause {n!r} instead of FORMAT_CAUSE_*"
        assert not re.search(r'cause = "', text), f"{path} sets a cause by its name"


def test_every_cause_is_read_back_as_itself(tmp_path):
    """A post-mortem naming each cause in turn: the report words it (a
    known cause gets its sentence, "<name> - why"), so the reader knows
    every name the table has; a name outside it is only echoed."""
    snap = json.loads((ROOT / "tests" / "golden" / "inputs" / "oom_exhausted.json").read_text())
    path = tmp_path / "s.json"
    for name in [n for _, n in CAUSES] + ["no_such_cause"]:
        snap["oom"]["cause"] = name
        path.write_text(json.dumps(snap))
        out = subprocess.run([str(CLI), "report", str(path)], capture_output=True, text=True)
        if out.returncode != 0:
            # a cause whose invariant this file breaks: known, and checked
            assert f'invariant "{name}' in out.stderr, (name, out.stderr)
            continue
        worded = re.search(rf"cause: +{name.replace('_', ' ')} - ", out.stdout) is not None
        assert worded == (name != "no_such_cause"), (name, out.stdout[:2000])
