"""The files the CLI writes are written as the library
writes its snapshots: a temporary beside OUT, then a rename.  So an
existing OUT is never written through (a symlink's target was
overwritten), never a FIFO (the command blocked) or a device node
(`recover --force` deleted it), and a full disk leaves no partial file."""
import os
import stat
import subprocess

import pytest

from conftest import CLI, ROOT, cli
from needs import needs
INPUTS = ROOT / "tests" / "golden" / "inputs"
STREAM = ROOT / "tests" / "fuzz" / "stream_seeds" / "cut.stream"
SNAP = INPUTS / "exit_train.json"

pytestmark = needs(CLI.exists(), f"{CLI}", "make cli builds it")


def writers(out):
    """Every command that writes a file at `out`."""
    return [["recover", "--force", "-o", out, STREAM], ["html", "-o", out, SNAP],
            ["export", "--format", "memory_viz", "-o", out, SNAP],
            ["export", "--format", "pprof", "-o", out, SNAP],
            ["timeline", "--chrome", out, SNAP],
            ["diff", "--html", out, SNAP, SNAP]]


def one_line_refusal(r, out, why):
    assert r.returncode != 0, r.stdout[-1000:]
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and f"'{out}'" in lines[0] and why in lines[0], r.stderr


def no_temporary(d):
    assert [p.name for p in d.iterdir() if p.name.startswith(".cumemtrace-tmp.")] == []


def test_a_symlink_as_output_is_refused_and_its_target_kept(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    out = tmp_path / "out"
    out.symlink_to(target)
    for args in writers(out):
        one_line_refusal(cli(*args), out, "symbolic link")
        assert target.read_text() == "keep me\n" and out.is_symlink()
    no_temporary(tmp_path)


def test_a_fifo_as_output_is_refused_at_once(tmp_path):
    out = tmp_path / "out.fifo"
    os.mkfifo(out)
    for args in writers(out):
        one_line_refusal(cli(*args), out, "not a regular file (a FIFO)")
        assert stat.S_ISFIFO(os.lstat(out).st_mode)
    no_temporary(tmp_path)


def test_a_device_node_as_output_is_refused_and_kept(tmp_path):
    """recover --force -o a /dev/full-like node unlinked it after the write
    failed."""
    out = tmp_path / "full"
    try:
        os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("making a device node needs root")
    for args in writers(out):
        one_line_refusal(cli(*args), out, "not a regular file (a character device)")
        assert stat.S_ISCHR(os.lstat(out).st_mode)
    no_temporary(tmp_path)


@pytest.fixture
def small_fs(tmp_path):
    """A 4 KiB tmpfs: every output below is larger."""
    d = tmp_path / "small"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill ({r.stderr.strip()})")
    yield d
    subprocess.run(["umount", str(d)], check=True)


def test_a_full_disk_leaves_no_partial_file(small_fs):
    out = small_fs / "out"
    for args in writers(out):
        if "pprof" in args:
            continue  # gzip makes it fit
        r = cli(*args)
        assert r.returncode != 0, args
        assert len(r.stderr.splitlines()) == 1, r.stderr
        assert "No space left on device" in r.stderr, r.stderr
        assert list(small_fs.iterdir()) == [], (args, list(small_fs.iterdir()))


def test_an_existing_regular_output_is_replaced_whole(tmp_path):
    out = tmp_path / "out"
    for args in writers(out):
        out.write_text("x" * 10_000_000)  # longer than any of them
        r = cli(*args)
        assert r.returncode == 0, (args, r.stderr)
        assert 0 < out.stat().st_size < 10_000_000, args
    no_temporary(tmp_path)


def test_recover_without_force_keeps_an_existing_output(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("mine\n")
    r = cli("recover", "-o", out, STREAM)
    one_line_refusal(r, out, "pass --force")
    assert out.read_text() == "mine\n"
    no_temporary(tmp_path)
