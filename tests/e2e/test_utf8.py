"""Snapshots are UTF-8 whatever bytes the process holds:
argv, the executable's name and path are arbitrary bytes on Linux; the
writer replaces each byte that does not begin a well-formed UTF-8 sequence
with U+FFFD (docs/snapshot-format.md, "Strings")."""
import json
import os
import shutil
import subprocess

from conftest import PROGS, base_env

# Each entry: (bytes as the process has them, the text the snapshot holds).
CASES = [
    (b"plain", "plain"),
    (b"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\u00e9 \u20ac \U0001F600"),
    (b"ctl\x1b[2J\r\x07\x7f", "ctl\x1b[2J\r\x07\x7f"),            # escaped, kept
    (b"bad\xff\xfe", "bad\ufffd\ufffd"),                          # never valid
    (b"cont\x80\xbf", "cont\ufffd\ufffd"),                        # lone continuations
    (b"over\xc0\xaf\xe0\x80\xaf\xf0\x80\x80\xaf",                 # overlong '/'
     "over" + "\ufffd" * 9),
    (b"cut\xe2\x82", "cut\ufffd\ufffd"),                          # sequence cut short
    (b"sur\xed\xa0\x80", "sur\ufffd\ufffd\ufffd"),                # encoded surrogate
    (b"big\xf4\x90\x80\x80", "big" + "\ufffd" * 4),               # above U+10FFFF
    (b"mix\xe2\x82\xac\x80\xe2\x82\xac", "mix\u20ac\ufffd\u20ac"),
]


def test_argv_and_exe_with_any_bytes_give_a_valid_utf8_snapshot(tmp_path):
    # The executable itself under a name that is not UTF-8 (its path and
    # basename are recorded too), in a directory that is not UTF-8.
    d = os.path.join(os.fsencode(tmp_path), b"dir\xff\xc0\xaf")
    os.mkdir(d)
    exe = os.path.join(d, b"rt\x80\x1b[2Jwork")
    shutil.copy(os.fsencode(PROGS / "rt_workload"), exe)
    out = tmp_path / "out"
    out.mkdir()
    args = [exe, b"basic"] + [c[0] for c in CASES]
    env = base_env({"CUMEMTRACE_OUTPUT": str(out / "snap.json")})
    proc = subprocess.run(args, cwd=out, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    raw = (out / "snap.json").read_bytes()
    raw.decode("utf-8")                  # strict: raises on any invalid byte
    snap = json.loads(raw)               # what json.load does on the file
    cmdline = snap["process"]["cmdline"]
    assert cmdline[0] == exe.decode("utf-8", "replace")
    assert cmdline[2:] == [c[1] for c in CASES]
    assert snap["process"]["exe"] == "rt\ufffd\x1b[2Jwork"
