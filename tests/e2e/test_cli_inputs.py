"""Inputs the CLI must refuse, in one line and at once:
anything that is not a regular file - a symlink to /dev/zero, a FIFO named
*.json, such a file inside a run directory - and a stream whose record
claims more bytes than the file holds.  Every read is bounded by the
file's size: no view may read without end or block."""
import json
import os
import shutil
import struct

import pytest

from conftest import CLI, ROOT, cli, crc32c
from needs import needs

INPUTS = ROOT / "tests" / "golden" / "inputs"

pytestmark = needs(CLI.exists(), f"{CLI}", "make cli builds it")


def refused(r, path, why):
    assert r.returncode != 0, r.stdout[-2000:]
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert f"'{path}'" in lines[0] and why in lines[0], lines[0]


def views(bad, good, tmp_path):
    out = tmp_path / "out"
    return [["report", bad], ["recover", "-o", out, bad], ["html", "-o", f"{out}.html", bad],
            ["export", "--format", "pprof", "-o", f"{out}.pb.gz", bad],
            ["diff", good, bad], ["flamegraph", bad], ["timeline", bad]]


@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.json"
    shutil.copy(INPUTS / "exit_train.json", p)
    return p


def test_a_symlink_to_dev_zero_is_refused_by_every_view(tmp_path, good):
    bad = tmp_path / "x.json"
    bad.symlink_to("/dev/zero")
    for args in views(bad, good, tmp_path):
        refused(cli(*args), bad, "not a regular file (a character device)")


def test_a_fifo_named_json_is_refused_by_every_view(tmp_path, good):
    bad = tmp_path / "x.json"
    os.mkfifo(bad)
    for args in views(bad, good, tmp_path):
        refused(cli(*args), bad, "not a regular file (a FIFO)")


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_special_file_inside_a_run_directory_is_refused(tmp_path, good, kind):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(good, d / "cumemtrace.a.1.json")
    bad = d / "cumemtrace.b.2.json"
    if kind == "fifo":
        os.mkfifo(bad)
    else:
        bad.symlink_to("/dev/zero")
    for args in (["report", d], ["diff", d, d]):
        refused(cli(*args), bad, "not a regular file")


def record(kind, payload, length=None):
    return struct.pack("<IIIB3x", 0x52544D43, len(payload) if length is None else length,
                       crc32c(payload), ord(kind)) + payload


def test_a_stream_record_larger_than_the_file_is_refused(tmp_path):
    """A sparse stream: 4 KB of data whose one checkpoint claims 3.99 GiB,
    the file's apparent size 4 GiB (the rest a hole).  report took 41 s and
    4.2 GB reading zeros; the record runs past the file's data."""
    p = tmp_path / "cumemtrace.x.1.stream"
    head = json.dumps({"format": "cumemtrace-stream", "version": 2, "pid": 1,
                       "start_wall_ns": 1, "flush_ms": 200}, separators=(",", ":")).encode()
    with open(p, "wb") as f:
        f.write(b"CMTSTRM1" + record("H", head) + record("C", b"{" * 4000, 0xFF600000))
        f.truncate(4 << 30)
    for args in (["report", p], ["recover", "-o", tmp_path / "o.json", p]):
        r = cli(*args)
        assert r.returncode != 0
        assert len(r.stderr.splitlines()) == 1, r.stderr
        assert "no complete checkpoint" in r.stderr, r.stderr


def test_a_stream_whose_checkpoint_is_unreadable_gets_one_line(tmp_path):
    """The line "recovered from a stream" was printed before the
    checkpoint was read, so its error made two lines."""
    seed = ROOT / "tests" / "fuzz" / "stream_seeds" / "cut.stream"
    data, out, off = seed.read_bytes(), bytearray(), 8
    out += data[:8]
    while off + 16 <= len(data):
        magic, n, crc, kind = struct.unpack_from("<IIIB", data, off)
        if off + 16 + n > len(data):
            break
        payload = data[off + 16:off + 16 + n]
        if kind == ord("C"):
            payload = payload.replace(b'"version":1', b'"version":99', 1)
        out += record(chr(kind), payload)
        off += 16 + n
    p = tmp_path / "cumemtrace.x.1.stream"
    p.write_bytes(bytes(out))
    r = cli("report", p)
    assert r.returncode != 0
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert "version 99" in r.stderr, r.stderr


@pytest.mark.parametrize("where", ["top", "group"])
def test_duplicate_keys_are_refused(tmp_path, where):
    """The text "devices":[...],"devices":[] read as one array
    of both (device 0 reported) where Python's json keeps the last (none)."""
    text = (INPUTS / "exit_train.json").read_text()
    if where == "top":
        bad = text.replace('"devices":', '"devices": [], "devices":', 1)
        assert bad != text
        key = "devices"
    else:
        doc = json.loads(text)
        i = text.index('"bytes":', text.index('"live":'))
        bad = text[:i] + '"bytes": 1, ' + text[i:]
        key = "bytes"
        assert doc  # the file itself is fine
    p = tmp_path / "dup.json"
    p.write_text(bad)
    r = cli("report", p)
    assert r.returncode != 0, r.stdout[-500:]
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert key in r.stderr and "given twice" in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_module_path_that_is_not_a_regular_file_is_not_read(tmp_path, kind):
    """A snapshot names the files its frames' debug information is read
    from: a FIFO there blocked `report` for good."""
    doc = json.loads((INPUTS / "exit_train.json").read_text())
    module = next(f["module"] for s in doc["stacks"] for f in s["frames"] if f.get("module"))
    special = tmp_path / "lib.so"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        special.symlink_to("/dev/zero")
    doc["modules"] = [{"name": module, "path": str(special), "build_id": None,
                       "vaddr_base": 0}]
    p = tmp_path / "mod.json"
    p.write_text(json.dumps(doc))
    r = cli("report", p)
    assert r.returncode == 0, r.stderr


def test_counters_keys_of_no_release_are_unknown_keys(tmp_path):
    """The format starts at the first release: "oom_dumps_suppressed" in
    counters (a draft's name for ooms.suppressed) is an unknown key, skipped
    like any other, so the report says nothing of post-mortems not written."""
    doc = json.loads((INPUTS / "exit_train.json").read_text())
    doc["counters"]["oom_dumps_suppressed"] = 3
    doc["counters"]["unknown_free_calls"] = 5
    doc["ooms"]["suppressed"] = 0
    f = tmp_path / "draft_counters.json"
    f.write_text(json.dumps(doc))
    r = cli("report", f)
    assert r.returncode == 0, r.stderr
    assert "not written" not in r.stdout, r.stdout


@pytest.mark.parametrize("section,key", [("config", "temporary_ms"), ("oom", "phase")])
def test_a_field_the_writer_always_writes_is_not_null(tmp_path, section, key):
    """The writer writes config.temporary_ms (0 when unset) and the OOM's
    phase (0 outside every phase) as numbers in every file: null there is
    not a file it wrote, and is refused in one line naming the field (it
    read as 'unknown', and the phase as 0)."""
    doc = json.loads((INPUTS / "oom_exhausted.json").read_text())
    assert isinstance(doc[section][key], int)
    doc[section][key] = None
    p = tmp_path / "null.json"
    p.write_text(json.dumps(doc))
    refused(cli("report", p), p, f"{section}.{key} is null")
