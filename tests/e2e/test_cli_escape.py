"""Recorded strings never drive the terminal: a crafted
snapshot puts ESC sequences, CR, BEL, a C1 CSI, a bidi override, a newline
and bytes that are not UTF-8 into every string the CLI prints (exe, cmdline,
host, reason, entry points, modules, symbols, Python files, post-mortem
names, the file name itself).  Every text view prints them as \\xNN; every
JSON output is valid UTF-8 JSON with the same values escaped."""
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from needs import needs

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
CLI = BUILD / "cumemtrace"
sys.path.insert(0, str(ROOT / "tests" / "golden"))
import gen_inputs  # noqa: E402

pytestmark = needs(CLI.exists(), f"{CLI}", "make cli builds it")

EVIL = "\x1b[2J\r\x07\x9b31m\u202e\n\x7f"
RAW = "@RAW@"            # replaced by bytes that are not UTF-8 after json.dump
RAW_BYTES = b"\xff\xc0\xaf\x80"
# What a terminal must never receive: C0 controls but newline, DEL, C1
# controls, bidi formatting characters, line/paragraph separators.
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f\x80-\x9f\u061c\u200e\u200f\u2028-\u202e"
                       "\u2066-\u2069]")


def poison(doc):
    evil = "x" + EVIL + RAW
    p = doc["process"]
    p["exe"] = "exe" + evil
    p["cmdline"] = ["python" + evil, "--arg" + evil]
    p["host"] = "host" + evil
    doc["reason"] = doc["reason"] + evil if doc["reason"] != "oom" else "oom"
    for st in doc["stacks"]:
        st["entry"] = st["entry"] + evil
        for f in st["frames"]:
            for k in ("module", "symbol", "file", "function", "marker"):
                if f.get(k):
                    f[k] = f[k] + evil
    doc["ooms"]["dumps"] = ["dump" + evil + ".json"]
    if doc.get("oom"):
        doc["oom"]["entry_point"] = "cudaMalloc" + evil
    return doc


def write(tmp_path, doc, name):
    path = tmp_path / name
    data = json.dumps(doc, indent=1).encode().replace(RAW.encode(), RAW_BYTES)
    path.write_bytes(data)
    return path


@pytest.fixture
def files(tmp_path):
    d = tmp_path / ("dir" + EVIL.replace("\n", "").replace("\r", ""))
    d.mkdir()
    exit_doc = poison(copy.deepcopy(gen_inputs.exit_train()))
    oom_doc = poison(copy.deepcopy(gen_inputs.oom_exhausted()))
    return (write(d, exit_doc, "exit" + "\x1b[2J\x07.json"),
            write(d, oom_doc, "oom\x1b]0;title\x07.json"))


def run(*args):
    r = subprocess.run([str(CLI)] + [str(a) for a in args], capture_output=True,
                       env=dict(os.environ, NO_COLOR="1"), timeout=60)
    return r


def assert_terminal_safe(data):
    text = data.decode("utf-8")                # strict: no stray bytes either
    bad = FORBIDDEN.search(text)
    assert bad is None, f"raw {bad.group()!r} in output:\n{text}"
    return text


TEXT_VIEWS = [
    ("report", "{exit}"), ("report", "{oom}"), ("report", "{exit}", "{oom}"),
    ("report", "--bytes", "{oom}"),
    ("diff", "{exit}", "{oom}"), ("diff", "--by", "module", "{exit}", "{oom}"),
    ("diff", "--by", "function", "{exit}", "{oom}"),
    ("flamegraph", "{exit}"), ("flamegraph", "--at", "oom", "{oom}"),
    ("flamegraph", "--at", "live", "{exit}"), ("flamegraph", "--at", "oom", "{exit}"),
    ("timeline", "{exit}"), ("timeline", "{oom}"),
]


@pytest.mark.parametrize("view", TEXT_VIEWS, ids=lambda v: "-".join(v))
def test_text_views_escape_control_characters(files, view):
    exit_f, oom_f = files
    args = [a.format(exit=exit_f, oom=oom_f) for a in view]
    r = run(*args)
    assert_terminal_safe(r.stdout)
    assert_terminal_safe(r.stderr)
    out = (r.stdout + r.stderr).decode()
    assert "\\x1b[2J" in out, out          # shown, not executed


def all_strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from all_strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from all_strings(x)


def test_json_outputs_are_valid_and_keep_the_values(files, tmp_path):
    exit_f, oom_f = files
    for args in (["report", "--json", exit_f], ["report", "--json", oom_f],
                 ["timeline", "--format", "chrome", exit_f]):
        r = run(*args)
        assert r.returncode == 0, r.stderr
        assert_terminal_safe(r.stdout)        # \u escapes, nothing raw
        strings = list(all_strings(json.loads(r.stdout)))
        want = "x" + EVIL + "\ufffd" * len(RAW_BYTES)
        assert any(want in v for v in strings), strings[:20]


def test_error_messages_escape_the_file_name(tmp_path):
    bad = tmp_path / "bad\x1b[2J\x07.json"
    bad.write_text("{")
    r = run("report", bad)
    assert r.returncode != 0
    err = assert_terminal_safe(r.stderr)
    assert "bad\\x1b[2J\\x07.json" in err, err


# ---- the lines that say what was written ----

BAD_NAME = "x\x1b[2J\x07\x9b31m"
STREAM = ROOT / "tests" / "fuzz" / "stream_seeds" / "cut.stream"


def test_the_wrote_lines_of_the_cli_escape_the_file_name(tmp_path, files):
    exit_file = files[0]
    out = tmp_path / ("out" + BAD_NAME)
    for args in (["html", "-o", f"{out}.html", exit_file],
                 ["timeline", "--chrome", f"{out}.trace.json", exit_file],
                 ["recover", "-o", f"{out}.json", STREAM]):
        r = run(*args)
        assert r.returncode == 0, r.stderr
        assert "wrote" in assert_terminal_safe(r.stderr), r.stderr


def test_report_dir_escapes_the_stream_it_recovered_from(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / f"cumemtrace.{BAD_NAME}.1.stream").write_bytes(STREAM.read_bytes())
    r = run("report", d)
    assert r.returncode == 0, r.stderr
    assert "recovered from a stream" in assert_terminal_safe(r.stderr), r.stderr


def test_the_library_and_run_escape_the_exe_name(tmp_path):
    """The exe's name is in every snapshot's name: the library's `wrote`
    line and `cumemtrace run`'s list printed it raw."""
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from conftest import PROGS, base_env, run_env
    exe = tmp_path / ("rt" + BAD_NAME)
    exe.write_bytes((PROGS / "rt_workload").read_bytes())
    exe.chmod(0o755)
    r = subprocess.run([str(exe), "basic"], cwd=tmp_path, env=base_env(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "wrote" in assert_terminal_safe(r.stderr)
    d = tmp_path / "viarun"
    d.mkdir()
    r = subprocess.run([str(CLI), "run", "--", str(exe), "basic"], cwd=d, env=run_env(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "snapshot written" in assert_terminal_safe(r.stderr)
