"""`cumemtrace export --format pprof` read by the real pprof (`go tool
pprof`, Debian's golang-go): what `-top` prints for each sample type, and
`-diff_base` between two exports, must be the snapshot's own numbers, with
Python frames as function names at their file:line."""
import collections
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import CLI, ROOT
from needs import DEPS, needs

INPUTS = ROOT / "tests" / "golden" / "inputs"
GO = shutil.which("go")
pytestmark = needs(GO is not None, "go (its pprof reads the export)", DEPS + " (golang-go)")
TYPES = ("inuse_space", "inuse_space_exit", "alloc_space", "alloc_objects")
ROW = re.compile(r"^\s*(-?\d+)B?\s+\S+%\s+\S+%\s+(-?\d+)B?\s+\S+%\s+(.+)$")


def export(path, out):
    subprocess.run([str(CLI), "export", "--format", "pprof", str(path), "-o", str(out)],
                   check=True, capture_output=True, timeout=60)
    return out


def pprof(*args):
    """`go tool pprof -top -lines` with nothing dropped: {node: (flat, cum)}
    and the header lines."""
    env = dict(os.environ, HOME=os.environ.get("HOME", "/tmp"), PPROF_TMPDIR="/tmp")
    r = subprocess.run([GO, "tool", "pprof", "-top", "-lines", "-unit=B", "-nodefraction=0",
                        "-nodecount=100000"] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    head, rows, table = [], {}, False
    for line in r.stdout.splitlines():
        if table:
            m = ROW.match(line)
            assert m, f"pprof printed a row we cannot read: {line!r}"
            rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
        elif line.split() == ["flat", "flat%", "sum%", "cum", "cum%"]:
            table = True
        else:
            head.append(line)
    assert table, r.stdout + r.stderr
    return rows, head, r.stderr


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def node_names(snap):
    """How pprof -lines must name each frame: a Python frame as
    'function file:line', a native one as our views print it."""
    syms = sorted({f["symbol"] for s in snap["stacks"] for f in s["frames"] if f.get("symbol")})
    dem = demangle(syms) if syms else {}
    names = {}
    for s in snap["stacks"]:
        out = []
        for f in s["frames"]:
            if "marker" in f:
                out.append("[" + f["marker"] + "]")
            elif f.get("module") == "python":
                out.append(f"{f['function']} {f['file']}:{f['line']}")
            elif f.get("symbol"):
                out.append(os.path.basename(f["module"]) + "!" + dem[f["symbol"]])
            else:
                out.append(os.path.basename(f["module"]) + "+0x%x" % f["offset"])
        names[s["id"]] = (s["entry"], out)
    return names


def expected(snap, kind):
    """{node: [flat, cum]} of one sample type over every device: each
    stack's value is flat on its entry point (the leaf) and cumulative
    once on every frame of the stack."""
    names = node_names(snap)
    per_stack = collections.Counter()
    if kind in ("inuse_space", "inuse_space_exit"):
        key = "at_peak" if kind == "inuse_space" else "live"
        for d in snap["devices"]:
            for g in d[key]:
                if g["stack"]:
                    per_stack[g["stack"]] += g["bytes"]
    else:
        for r in snap["events"]["data"]:
            if r[1] >= 0 and r[3] > 0 and r[4]:
                per_stack[r[4]] += r[3] if kind == "alloc_space" else 1
    want = collections.defaultdict(lambda: [0, 0])
    for sid, v in per_stack.items():
        entry, frames = names[sid]
        want[entry][0] += v
        for n in set([entry] + frames):
            want[n][1] += v
    return want


def same(got, want):
    """Every node either prints carries the expected values."""
    want = {k: tuple(v) for k, v in want.items() if v != [0, 0]}
    got = {k: v for k, v in got.items() if v != (0, 0)}
    assert got == want


@pytest.mark.parametrize("name", ["exit_train.json", "oom_exhausted.json", "rank1.oom.json",
                                  "thinned.json"])
def test_pprof_top_for_each_sample_type(name, tmp_path):
    snap = json.loads((INPUTS / name).read_text())
    prof = export(INPUTS / name, tmp_path / "p.pb.gz")
    for kind in TYPES:
        got, head, err = pprof("-sample_index=" + kind, prof)
        assert f"Type: {kind}" in head
        assert f"File: {snap['process']['exe']}" in head
        assert "Main binary filename not available" not in err
        same(got, expected(snap, kind))
    if snap["events"]["stride"] > 1:
        assert any("lower bounds" in h for h in head)
    # Python frames are functions at their lines.
    assert any(re.match(r"^\w+ /.*\.py:\d+$", n) for n in got)


def test_pprof_diff_base(tmp_path):
    base = json.loads((INPUTS / "diff_base.json").read_text())
    new = json.loads((INPUTS / "diff_new.json").read_text())
    pb = export(INPUTS / "diff_base.json", tmp_path / "base.pb.gz")
    pn = export(INPUTS / "diff_new.json", tmp_path / "new.pb.gz")
    for kind in ("inuse_space", "alloc_objects"):
        got, _, _ = pprof("-sample_index=" + kind, "-diff_base", pb, pn)
        want = expected(new, kind)
        for k, v in expected(base, kind).items():
            want[k][0] -= v[0]
            want[k][1] -= v[1]
        assert any(v[1] < 0 for v in want.values()) or kind != "inuse_space"
        same(got, want)


def test_pprof_keeps_names_it_would_shorten(tmp_path):
    """pprof cuts (...) and <...> out of a name equal to its system name
    (taking it for demangled C++): a Python "<module>" must still print,
    and native overloads keep their parameter lists apart."""
    snap = json.loads((INPUTS / "exit_train.json").read_text())
    py = [f for s in snap["stacks"] for f in s["frames"] if f.get("module") == "python"]
    for f in py:
        if f["file"].endswith("train.py"):
            f["function"] = "<module>"
    src = tmp_path / "module.json"
    src.write_text(json.dumps(snap))
    got, _, _ = pprof(export(src, tmp_path / "m.pb.gz"))
    assert any(n.startswith("<module> /") for n in got)
    assert any("!" in n and n.endswith(")") for n in got)
    same(got, expected(snap, "inuse_space"))


def test_pprof_http_serves_our_profile(tmp_path):
    """`pprof -http` (its web UI) reads the export: the top table and the
    flame graph page list our Python functions and entry points."""
    import signal
    import socket
    import time
    import urllib.request
    snap = json.loads((INPUTS / "exit_train.json").read_text())
    prof = export(INPUTS / "exit_train.json", tmp_path / "p.pb.gz")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, HOME=os.environ.get("HOME", "/tmp"), PPROF_TMPDIR=str(tmp_path))
    p = subprocess.Popen([GO, "tool", "pprof", "-no_browser", "-nodefraction=0",
                          f"-http=127.0.0.1:{port}",
                          str(prof)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=env, start_new_session=True)
    try:
        pages, deadline = {}, time.monotonic() + 60
        for page in ("top", "flamegraph"):
            while page not in pages:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui/{page}",
                                                timeout=10) as r:
                        pages[page] = r.read().decode()
                except OSError:
                    assert p.poll() is None, p.stderr.read().decode()
                    assert time.monotonic() < deadline, "pprof -http did not answer"
                    time.sleep(0.2)
        # what the default sample type holds: Python functions (named
        # "function file:line" by -lines) and entry points
        want = {n.split(" ")[0] for n, v in expected(snap, "inuse_space").items()
                if v[1] and ("!" not in n and "+0x" not in n and not n.startswith("["))}
        assert "forward" in want and "cudaMalloc" in want
        for text in pages.values():
            assert all(f in text for f in want), want
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
