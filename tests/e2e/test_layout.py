"""Output that fits the terminal: the width comes from --width,
else the terminal (COLUMNS, TIOCGWINSZ), else 80 when piped; --full cuts
nothing; caller chains are cut only at frame boundaries, so two frames are
never joined into one fake name."""
import json
import os
import pty
import subprocess

import pytest

from conftest import CLI, ROOT, cli

INPUTS = ROOT / "tests" / "golden" / "inputs"


def long_names(tmp_path):
    """A snapshot whose call sites have long Python names and deep chains."""
    doc = json.loads((INPUTS / "exit_train.json").read_text())
    for st in doc["stacks"]:
        for i, f in enumerate(st["frames"]):
            if f.get("module") == "python":
                f["function"] = f"Linear.__init__.<locals>.build_{i}.<locals>.<listcomp>"
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    return path


def frames_known(path):
    """Every frame name the report's model knows, as text views show them."""
    names = set()

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            names.add(v.rsplit("/", 1)[-1] if v.startswith("/") else v)
    walk(json.loads(cli("report", "--json", path).stdout))
    return names


def caller_lines(text):
    return [l.strip() for l in text.splitlines() if l.strip().startswith("< ")]


def test_piped_output_is_80_columns_and_cut_between_frames(tmp_path):
    path = long_names(tmp_path)
    r = cli("report", path, env={"COLUMNS": "200"})  # COLUMNS is for terminals
    assert r.returncode == 0, r.stderr
    assert max(len(l) for l in r.stdout.splitlines()) <= 80
    known = frames_known(path)
    lines = caller_lines(r.stdout)
    assert lines
    for line in lines:
        parts = line[2:].split(" < ")
        for p in parts:
            assert p == "..." or p in known, (p, line)


def test_width_and_full(tmp_path):
    path = long_names(tmp_path)
    wide = cli("report", "--width", "160", path).stdout
    assert max(len(l) for l in wide.splitlines()) <= 160
    assert max(len(l) for l in wide.splitlines()) > 80
    narrow = cli("report", path).stdout
    assert any(l.endswith("< ...") for l in caller_lines(narrow))
    full = cli("report", "--full", path).stdout
    assert not any(l.endswith("< ...") for l in caller_lines(full))
    assert sum(len(l) for l in caller_lines(full)) > sum(len(l) for l in caller_lines(narrow))


def test_too_narrow_a_width_is_refused():
    r = cli("report", "--width", "10", INPUTS / "exit_train.json")
    assert r.returncode == 2 and "--width wants columns from 40" in r.stderr


def test_a_terminal_gives_its_width(tmp_path):
    path = long_names(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["COLUMNS"] = "120"
        os.environ["NO_COLOR"] = "1"
        os.execv(str(CLI), [str(CLI), "report", str(path)])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    lines = out.decode().replace("\r", "").splitlines()
    assert max(len(l) for l in lines) <= 120
    assert max(len(l) for l in lines) > 80


def test_diff_takes_the_same_options():
    r = cli("diff", "--full", INPUTS / "diff_base.json", INPUTS / "diff_new.json")
    assert r.returncode == 0, r.stderr


# ---- frame filters (every view but run) ----

def folded(*args):
    r = cli("flamegraph", *args)
    assert r.returncode == 0, r.stderr
    return [l.rpartition(" ")[0].split(";") for l in r.stdout.splitlines()]


def with_interpreter(tmp_path):
    """exit_train.json with CPython's and libc's start-up frames at the
    outer end of every stack, as a real Python process has them."""
    doc = json.loads((INPUTS / "exit_train.json").read_text())
    tail = [{"module": "python3", "offset": 1193657, "symbol": "PyEval_EvalCode"},
            {"module": "python3", "offset": 2391446, "symbol": None},
            {"module": "python3", "offset": 2424957, "symbol": "Py_RunMain"},
            {"module": "libc.so.6", "offset": 160329, "symbol": None},
            {"module": "libc.so.6", "offset": 160516, "symbol": "__libc_start_main"},
            {"module": "python3", "offset": 2259920, "symbol": "_start"}]
    for st in doc["stacks"]:
        st["frames"] += tail
    path = tmp_path / "interp.json"
    path.write_text(json.dumps(doc))
    return path


def test_interpreter_and_start_up_frames_are_folded_by_default(tmp_path):
    src = with_interpreter(tmp_path)
    every = [f for s in folded("--all-frames", src) for f in s]
    assert any(f.startswith("python3!") for f in every)  # the file has them
    assert any("libc.so" in f for f in every)
    default = [f for s in folded(src) for f in s]
    assert not any(f.startswith("python3!") or "libc.so" in f for f in default)
    assert any(f.endswith(".py:110:main") for f in default)  # Python frames stay
    # the bytes are the same whatever is folded
    total = lambda out: sum(int(l.rpartition(" ")[2]) for l in out.splitlines())
    assert total(cli("flamegraph", src).stdout) == total(cli("flamegraph", "--all-frames",
                                                             src).stdout)


# ---- the framework's own frames ----

MUL_BACKWARD = "_ZN5torch8autograd9generated12MulBackward05applyEOSt6vectorIN2at6TensorESaIS5_EE"
ENGINE = "_ZN5torch8autograd6Engine11thread_mainERKSt10shared_ptrINS0_9GraphTaskEE"
CACHING_MALLOC = ("_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6"
                  "mallocEPPvimP11CUstream_st")


def with_framework(tmp_path):
    """exit_train.json where stack 3 becomes stack 1's twin (the same Python
    lines; another c10 frame, a module.py frame of an installed torch), and
    stack 5 a stack of autograd's thread: native frames only, the node's
    among them.  Sizes unchanged, so the file stays consistent."""
    doc = json.loads((INPUTS / "exit_train.json").read_text())
    stacks = {st["id"]: st for st in doc["stacks"]}
    twin = json.loads(json.dumps(stacks[1]["frames"]))
    twin[0]["offset"] += 64
    twin[0]["symbol"] = CACHING_MALLOC
    mod = "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py"
    at = next(i for i, f in enumerate(twin) if f.get("file"))
    twin[at + 1:at + 1] = [{"module": "python", "file": mod, "line": 1798,
                            "function": "_call_impl"}]
    stacks[3]["frames"] = twin
    stacks[5]["frames"] = [
        {"module": "libc10_cuda.so", "offset": 1000, "symbol": CACHING_MALLOC},
        {"module": "libtorch_cpu.so", "offset": 2000, "symbol": MUL_BACKWARD},
        {"module": "libtorch_cpu.so", "offset": 3000, "symbol": ENGINE},
        {"marker": "python frames unavailable: GIL not held"}]
    path = tmp_path / "framework.json"
    path.write_text(json.dumps(doc))
    return path


def test_framework_frames_are_folded_and_rows_merge(tmp_path):
    src = with_framework(tmp_path)
    r = cli("report", "--json", src)
    assert r.returncode == 0, r.stderr
    sites = json.loads(r.stdout)["snapshots"][0]["devices"][0]["at_peak"]
    labels = [g["site"] for g in sites]
    # stack 1 and its twin differ only in folded frames: one row
    assert labels.count("/home/alice/proj/model.py:142:forward") == 1, labels
    forward = next(g for g in sites if g["site"] == "/home/alice/proj/model.py:142:forward")
    assert not any("libc10" in f or "module.py" in f for f in forward["frames"]), forward
    # autograd's thread: its node, by the name PyTorch's tracebacks give it
    r = cli("report", src, env={"COLUMNS": "200"})
    assert "autograd: MulBackward0" in r.stdout, r.stdout
    assert "c10::" not in r.stdout and "_call_impl" not in r.stdout, r.stdout
    # --all-frames shows everything; exports keep the frames for their viewers
    every = [f for s in folded("--all-frames", src) for f in s]
    assert any("c10::cuda" in f for f in every) and any("_call_impl" in f for f in every)
    r = subprocess.run([str(CLI), "export", "--format", "speedscope", str(src)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "c10::cuda" in r.stdout, r.stderr


def test_python_only_native_only_and_hide():
    src = INPUTS / "exit_train.json"
    py = [f for s in folded("--python-only", src) for f in s[:-1]]  # last: entry
    assert py and all(".py:" in f or f.startswith("[") for f in py)
    native = [f for s in folded("--native-only", src) for f in s]
    assert not any(".py:" in f for f in native)
    hidden = [f for s in folded("--hide", "libc10|libtorch", src) for f in s]
    assert not any("libc10" in f or "libtorch" in f for f in hidden)
    assert any(".py:" in f for f in hidden)


def test_filter_option_errors():
    src = INPUTS / "exit_train.json"
    r = cli("report", "--hide", "(", src)
    assert r.returncode == 2 and "not an extended regular expression" in r.stderr
    r = cli("report", "--python-only", "--native-only", src)
    assert r.returncode == 2 and "exclude each other" in r.stderr


# ---- --focus (pprof's -focus: keep the samples through a matching frame) ----

def stack_text(frame):
    """A frame of the file as the CLI names it, for the frames this test's
    regular expressions look at (Python frames and native symbols)."""
    if frame.get("file"):
        return f"{frame['file']}:{frame['line']}:{frame['function']}"
    return f"{frame.get('module')}!{frame.get('symbol')}"


def focused_peak(doc, regex):
    """Bytes at peak of the groups whose whole recorded stack has a frame
    matching regex - computed from the file, not by the CLI."""
    import re
    hit = {st["id"] for st in doc["stacks"]
           if any(re.search(regex, stack_text(f)) for f in st["frames"])}
    return sum(g["bytes"] for d in doc["devices"] for g in d["at_peak"]
               if g.get("stack") in hit)


def test_focus_keeps_only_samples_through_a_matching_frame():
    src = INPUTS / "exit_train.json"
    doc = json.loads(src.read_text())
    for regex in (r"model\.py:142", "ncclCommInitRank", "optim|setup"):
        want = focused_peak(doc, regex)
        assert want > 0
        stacks = folded("--focus", regex, "--all-frames", src)
        total = sum(int(l.rpartition(" ")[2])
                    for l in cli("flamegraph", "--focus", regex, src).stdout.splitlines())
        assert total == want, regex
        import re
        assert stacks and all(any(re.search(regex, f) for f in s) for s in stacks)
        m = json.loads(cli("report", "--json", "--focus", regex, src).stdout)
        assert sum(g["bytes"] for g in m["snapshots"][0]["devices"][0]["at_peak"]) == want
        text = cli("report", "--focus", regex, src).stdout
        assert "focus: only call sites" in text and "in focus:" in text
    assert folded("--focus", "matches-no-frame", src) == []


def test_focus_sees_the_frames_hide_and_folding_drop(tmp_path):
    """pprof's -focus matches the stack before -hide removes frames; here
    also before the default folding of start-up frames."""
    src = INPUTS / "exit_train.json"
    only = folded("--focus", "empty_cuda", src)
    both = folded("--focus", "empty_cuda", "--hide", "libtorch|libc10", src)
    assert len(both) == len(only) == 3
    assert not any("libtorch" in f or "libc10" in f for s in both for f in s)
    interp = with_interpreter(tmp_path)
    assert len(folded("--focus", "__libc_start_main", interp)) == len(folded(interp))


def test_focus_in_the_html_page_and_the_other_views(tmp_path):
    src = INPUTS / "exit_train.json"
    doc = json.loads(src.read_text())
    page = tmp_path / "p.html"
    r = cli("html", "--focus", "ncclCommInitRank", src, "-o", page)
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    start = text.index('<script type="application/json" id="cmt-data">') + 46
    f = json.loads(text[start:text.index("</script>", start)])["files"][0]
    assert sum(f["sites"]["at_peak"]) == focused_peak(doc, "ncclCommInitRank")
    for view in (["diff", src, src], ["timeline", src], ["export", "--format", "speedscope",
                                                         src, "-o", tmp_path / "s.json"]):
        r = cli(view[0], "--focus", "nccl", *view[1:])
        assert r.returncode == 0, (view, r.stderr)


def test_focus_option_errors():
    src = INPUTS / "exit_train.json"
    r = cli("flamegraph", "--focus", "(", src)
    assert r.returncode == 2 and "--focus: '(' is not an extended regular" in r.stderr
    r = cli("report", src, "--focus")
    assert r.returncode == 2 and "--focus needs a regular expression" in r.stderr


# ---- a post-mortem in one screen ----

OOM_INPUTS = ["oom_exhausted.json", "oom_fragmentation.json", "oom_limit.json",
              "rank1.oom.json", "torch/demo_oom.json", "torch/history_oom.json",
              "torch/segments_oom.json"]


@pytest.mark.parametrize("name", OOM_INPUTS)
def test_a_post_mortem_reads_in_one_screen(name):
    # named relative to the inputs, as a user in the run's directory would:
    # the report's first line quotes the name, and the checkout's own path
    # (CI's clone is elsewhere) must not decide whether it fits
    src = INPUTS / name
    lines = cli("report", name, cwd=INPUTS).stdout.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 80, "\n".join(lines)
    text = "\n".join(lines)
    tables = sum(text.count(t) for t in ("Top holders", "Call sites at peak", "Live at"))
    assert tables <= 1 and "report --full" in text, text
    full = cli("report", "--full", src).stdout
    assert "Call sites at peak" in full and "Live at this dump" in full, full
