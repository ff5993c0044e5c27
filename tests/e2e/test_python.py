"""Python frames in every stack: the machine's real CPython runs
tests/python/train.py, which allocates through the simulated runtime from
nested functions in two files; the snapshot must name the exact
file:line:function chain, innermost first, in place of the interpreter's
evaluation frames.  CUMEMTRACE_TEST_PYTHON picks another CPython to run the
scripts with (default /usr/bin/python3)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT, device, stacks
from needs import DEPS, missing, needs

PYTHON = os.environ.get("CUMEMTRACE_TEST_PYTHON", "/usr/bin/python3")
SCRIPTS = ROOT / "tests" / "python"
TRAIN = SCRIPTS / "train.py"
EVAL = "_PyEval_EvalFrameDefault"
NO_GIL = "python frames unavailable: GIL not held"
REPEAT = 3  # train.REPEAT

pytestmark = needs(os.access(PYTHON, os.X_OK), f"CPython at {PYTHON}", DEPS + " (python3)")


def _version():
    out = subprocess.run([PYTHON, "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, text=True).stdout.split()
    return tuple(int(x) for x in out) if out else (0, 0)


VERSION = _version() if os.access(PYTHON, os.X_OK) else (0, 0)
# 3.11 and newer inline Python-to-Python calls in one C evaluation: all
# Python frames stand together where the innermost evaluation frame was.
INLINED = VERSION >= (3, 11)


def _sizes():
    src = TRAIN.read_text()
    body = re.search(r"SIZES = \{(.*?)\n\}", src, re.S).group(1)
    return {k: eval(v, {"MiB": 1 << 20})
            for k, v in re.findall(r'"(\w+)": ([^,]+),', body)}


SIZES = _sizes()


def _tags():
    """{tag: (file basename, line)} from the `# @tag` comments."""
    tags = {}
    for path in SCRIPTS.glob("*.py"):
        for no, line in enumerate(path.read_text().splitlines(), 1):
            m = re.search(r"# @(\w+)\s*$", line)
            if m:
                assert m.group(1) not in tags, f"tag @{m.group(1)} twice"
                tags[m.group(1)] = (path.name, no)
    return tags


TAGS = _tags()


def func(qualname):
    """What CPython calls a function: co_qualname from 3.11, co_name before."""
    return qualname if VERSION >= (3, 11) else qualname.rsplit(".", 1)[-1]


def chain(*steps):
    """Expected Python frames from (tag, qualname) pairs, innermost first."""
    return [(*TAGS[tag], func(name)) for tag, name in steps]


HEAD = [("malloc", "Runtime.malloc"), ("forward", "Model.forward")]


def py_frames(stack):
    return [(os.path.basename(f["file"]), f["line"], f["function"])
            for f in stack["frames"] if f.get("module") == "python"]


def markers(stack):
    return [f["marker"] for f in stack["frames"] if "marker" in f]


def native_symbols(stack):
    return [f.get("symbol") for f in stack["frames"]
            if "offset" in f and f.get("module") != "python"]


def run_train(run, scenario, env=None):
    r = run([PYTHON, TRAIN, BUILD, scenario], env=env)
    return r, r.only("exit")


def alloc_stacks(snap, size):
    """The stacks of the allocations of `size` bytes, each with its count."""
    ids = {}
    for row in snap["events"]["data"]:
        if row[3] == size:
            ids[row[4]] = ids.get(row[4], 0) + 1
    by_id = stacks(snap)
    return [(by_id[i], n) for i, n in sorted(ids.items())]


def only_stack(snap, scenario):
    found = alloc_stacks(snap, SIZES[scenario])
    assert len(found) == 1, f"expected one stack for {scenario}: {found}"
    stack, count = found[0]
    assert count == REPEAT, f"{count} allocations on one stack, expected {REPEAT}"
    return stack


def assert_spliced(stack, expected):
    """Python frames equal `expected`, in order; they replace the evaluator's
    frames (none left); native frames surround them."""
    assert py_frames(stack) == expected
    assert EVAL not in native_symbols(stack), stack["frames"]
    assert markers(stack) == []
    kinds = ["py" if f.get("module") == "python" else "native"
             for f in stack["frames"]]
    assert kinds[0] == "native"  # ctypes/libffi called cudaMalloc
    if INLINED:
        first = kinds.index("py")
        assert kinds[first:first + len(expected)] == ["py"] * len(expected)


# ---- GIL held (ctypes.PyDLL, like a framework's forward pass) ----

def test_pydll_exact_chain_across_two_files(run):
    r, snap = run_train(run, "pydll")
    assert snap["config"]["python"] is True and snap["config"]["native"] is True
    stack = only_stack(snap, "pydll")
    assert stack["entry"] == "cudaMalloc"
    assert_spliced(stack, chain(*HEAD, ("step", "step"), ("train", "train"),
                                ("main_train", "main"), ("module", "<module>")))
    if INLINED:
        # the Python frames end the stack: native unwinding stopped at the
        # evaluator they replace (what lay beyond: the interpreter, main)
        assert stack["frames"][-1].get("module") == "python", stack["frames"]
        assert "Py_RunMain" not in native_symbols(stack), stack["frames"]
    else:
        # the process's own native frames are still there, outside Python
        assert "Py_RunMain" in native_symbols(stack) or \
            "main" in native_symbols(stack), stack["frames"]


def test_each_line_is_its_own_frame(run):
    _, snap = run_train(run, "lines")
    found = alloc_stacks(snap, SIZES["lines"])
    assert len(found) == 2, found
    tail = chain(("main_lines", "main"), ("module", "<module>"))
    got = sorted(py_frames(s) for s, _ in found)
    assert got == sorted([chain(HEAD[0], ("twice_a", "Model.forward_twice")) + tail,
                          chain(HEAD[0], ("twice_b", "Model.forward_twice")) + tail])


def test_thread_started_from_python(run):
    _, snap = run_train(run, "thread")
    stack = only_stack(snap, "thread")
    frames = py_frames(stack)
    ours = chain(*HEAD, ("step", "step"), ("train", "train"),
                 ("worker", "worker"))
    assert frames[:len(ours)] == ours
    rest = frames[len(ours):]
    assert [f for f, _, _ in rest] == ["threading.py"] * len(rest)
    assert [fn for _, _, fn in rest] == [func("Thread.run"),
                                         func("Thread._bootstrap_inner"),
                                         func("Thread._bootstrap")]
    assert EVAL not in native_symbols(stack)
    assert markers(stack) == []


def test_generator_frame(run):
    _, snap = run_train(run, "generator")
    stack = only_stack(snap, "generator")
    assert py_frames(stack) == chain(*HEAD, ("batches", "batches"),
                                     ("main_batches", "main"),
                                     ("module", "<module>"))
    assert EVAL not in native_symbols(stack)


def test_coroutine_frames(run):
    _, snap = run_train(run, "coroutine")
    stack = only_stack(snap, "coroutine")
    assert py_frames(stack) == chain(*HEAD, ("fetch", "fetch"),
                                     ("load", "load"),
                                     ("main_coroutine", "main"),
                                     ("module", "<module>"))
    assert EVAL not in native_symbols(stack)


def test_capture_runs_no_python_code(run):
    """gc.set_threshold(1): were a collection (and its callbacks, Python
    code) to start while we create frame objects (3.11), the callback would
    see libcumemtrace on the C stack."""
    r, snap = run_train(run, "gc")
    assert "collections inside cumemtrace: 0" in r.stdout, r.stdout + r.stderr
    found = alloc_stacks(snap, SIZES["gc"])
    assert len(found) == 1
    frames = py_frames(found[0][0])
    assert frames[:3] == chain(*HEAD, ("deep_leaf", "deep"))
    assert frames[3:33] == chain(("deep", "deep")) * 30


def test_deep_recursion_is_truncated_with_a_marker(run):
    _, snap = run_train(run, "recursion")
    found = alloc_stacks(snap, SIZES["recursion"])
    assert len(found) == 1
    stack = found[0][0]
    assert len(stack["frames"]) <= 256
    assert markers(stack) == ["python frames truncated"]
    frames = py_frames(stack)
    assert frames[:3] == chain(*HEAD, ("deep_leaf", "deep"))
    assert set(frames[3:]) == set(chain(("deep", "deep")))
    # the marker follows the last Python frame kept
    kinds = ["py" if f.get("module") == "python" else
             "marker" if "marker" in f else "native" for f in stack["frames"]]
    last_py = max(i for i, k in enumerate(kinds) if k == "py")
    assert kinds[last_py + 1] == "marker"


# ---- GIL released (ctypes.CDLL, backward threads, C threads) ----

def test_cdll_gil_released_reads_the_frames_without_it(run):
    # PyTorch releases the GIL around every tensor operation.  The first
    # captures read the frames through CPython's fault-handler dumper and
    # prove the layout against its text, the rest read them directly: one
    # stack for all three allocations, named as with the GIL (co_qualname).
    r, snap = run_train(run, "cdll", env={"CUMEMTRACE_LOG": "debug"})
    stack = only_stack(snap, "cdll")
    assert py_frames(stack) == chain(*HEAD, ("step", "step"), ("train", "train"),
                                     ("main_train", "main"), ("module", "<module>"))
    assert markers(stack) == []
    assert EVAL not in native_symbols(stack)  # the Python frames took their place
    if VERSION[:2] in ((3, 11), (3, 12), (3, 13)):
        assert "frames read directly" in r.stderr, r.stderr


def test_no_gil_frames_on_every_allocation(run):
    # no time budget: 400 allocations without the GIL from 30 frames deep
    # all carry the whole chain, once read directly as much as before
    _, snap = run_train(run, "nogil_many")
    found = alloc_stacks(snap, SIZES["nogil_many"])
    assert sum(n for _, n in found) == 400  # train.NOGIL_ALLOCS
    assert len(found) == 1, [py_frames(st)[:3] for st, _ in found]
    frames = py_frames(found[0][0])
    assert markers(found[0][0]) == []
    assert [fn for _, _, fn in frames[:2]] == [func("Runtime.malloc"), "churn"]
    assert frames[2:32] == [frames[2]] * 30 and frames[-1][2] == "<module>"


def test_no_gil_code_objects_that_die_keep_their_own_lines(run):
    # 50 code objects, each freed after allocating once without the GIL; a
    # later one at a dead one's address must not inherit its line
    r, snap = run_train(run, "reused")
    reused = int(re.search(r"code addresses reused: (\d+)", r.stdout).group(1))
    rows = [row for row in snap["events"]["data"] if row[3] == SIZES["reused"]]
    assert len(rows) == 50  # train.REUSED
    by_id = stacks(snap)
    for i, row in enumerate(rows):
        frames = py_frames(by_id[row[4]])
        assert frames[1] == ("<generated>", i + 2, "f"), (i, frames[:3])
    # the case the identity check is for did happen (CPython's allocator
    # hands a freed code object's memory to the next one)
    assert reused > 0, r.stdout


# ---- switches ----

def test_python_off(run):
    _, snap = run_train(run, "pydll", env={"CUMEMTRACE_PYTHON": "0"})
    assert snap["config"]["python"] is False
    stack = only_stack(snap, "pydll")
    assert py_frames(stack) == [] and markers(stack) == []
    assert EVAL in native_symbols(stack)


def test_native_off_keeps_python_frames_only(run):
    _, snap = run_train(run, "pydll", env={"CUMEMTRACE_NATIVE": "0"})
    assert snap["config"]["native"] is False
    assert snap["config"]["python"] is True
    stack = only_stack(snap, "pydll")
    assert stack["entry"] == "cudaMalloc"
    assert all(f.get("module") == "python" for f in stack["frames"]), stack
    assert py_frames(stack) == chain(*HEAD, ("step", "step"), ("train", "train"),
                                     ("main_train", "main"),
                                     ("module", "<module>"))


def test_native_off_without_gil_keeps_python_frames_only(run):
    _, snap = run_train(run, "cdll", env={"CUMEMTRACE_NATIVE": "0"})
    stack = only_stack(snap, "cdll")
    assert stack["frames"] and all(f.get("module") == "python" for f in stack["frames"])


def test_malformed_switches_warn_once_and_keep_defaults(run):
    r, snap = run_train(run, "pydll", env={"CUMEMTRACE_PYTHON": "maybe",
                                           "CUMEMTRACE_NATIVE": "2"})
    assert r.stderr.count("ignoring CUMEMTRACE_PYTHON='maybe'") == 1, r.stderr
    assert r.stderr.count("ignoring CUMEMTRACE_NATIVE='2'") == 1, r.stderr
    assert snap["config"]["python"] is True and snap["config"]["native"] is True
    assert py_frames(only_stack(snap, "pydll"))


# ---- a process without Python ----

def _shape(snap):
    return sorted((s["entry"], tuple(tuple(sorted(f.items())) for f in s["frames"]))
                  for s in snap["stacks"])


def test_process_without_python_is_unaffected(run):
    r = run(["rt_workload", "basic"], env={"CUMEMTRACE_LOG": "debug"})
    snap = r.only("exit")
    assert snap["config"]["python"] is True
    # looked for once, at the first allocation, then never again
    assert r.stderr.count("no CPython in this process") == 1, r.stderr
    for s in snap["stacks"]:
        for f in s["frames"]:
            assert set(f) == {"module", "offset", "symbol"}, f
            assert f["module"] != "python"
    off = run(["rt_workload", "basic"], env={"CUMEMTRACE_PYTHON": "0"}).only("exit")
    assert _shape(off) == _shape(snap)
    assert device(off)["peak_bytes"] == device(snap)["peak_bytes"]


# ---- the benchmark script stays runnable ----

def test_bench_script_runs(run):
    r = run([PYTHON, ROOT / "scripts" / "bench_python.py", "--build", BUILD,
             "--pairs", "200", "--reps", "1"], preload=False)
    assert re.search(r"python frames: +\d", r.stdout), r.stdout + r.stderr


# ---- an application that loads libpython after us ----

def embedder(tmp_path, name):
    """tests/python/<name>.c built into tmp_path, and the shared libpython it
    is to dlopen; skips where there is no cc or no shared libpython."""
    cc = shutil.which("cc")
    info = subprocess.run(
        [PYTHON, "-c", "import sysconfig as s; print(s.get_config_var('LIBDIR'),"
                       " s.get_config_var('INSTSONAME'))"],
        capture_output=True, text=True).stdout.split()
    libpython = os.path.join(*info) if len(info) == 2 else ""
    if cc is None or not os.path.exists(libpython):
        missing(f"cc or the shared libpython ({libpython or 'none'})",
                DEPS + " (gcc, libpython3-dev)")
    embed = tmp_path / name
    subprocess.run([cc, "-o", embed, SCRIPTS / f"{name}.c", "-ldl"], check=True)
    return embed, libpython


def test_libpython_loaded_after_us_is_found_at_first_allocation(run, tmp_path):
    embed, libpython = embedder(tmp_path, "embed")
    code = (f"import runpy, sys; sys.argv = ['train.py', {str(BUILD)!r}, 'pydll']; "
            f"runpy.run_path({str(TRAIN)!r}, run_name='__main__')")
    r = run([embed, libpython, code], env={"CUMEMTRACE_LOG": "debug"})
    assert "no CPython in this process" not in r.stderr
    assert re.search(r"CPython 3\.\d+ found", r.stderr), r.stderr
    stack = only_stack(r.only("exit"), "pydll")
    frames = py_frames(stack)
    ours = chain(*HEAD, ("step", "step"), ("train", "train"),
                 ("main_train", "main"), ("module", "<module>"))
    assert frames[:len(ours)] == ours
    # runpy (frozen from 3.11) and the code string run by the application
    assert all("runpy" in f or f == "<string>" for f, _, _ in frames[len(ours):])
    assert frames[-1][0] == "<string>"


@pytest.mark.parametrize("when", ["never", "finalised"])
def test_no_pending_call_while_no_interpreter_runs(run, tmp_path, when):
    """A process that loaded libpython but runs no
    interpreter - never initialised, or after Py_FinalizeEx - allocates:
    cumemtrace finds CPython there, and asking it to load the PyTorch layer
    (Py_AddPendingCall) read a NULL interpreter - the host crashed in our
    hook (SIGSEGV in _PyEval_AddPendingCall, CPython 3.11).  Now it asks only
    where an interpreter runs and cannot be torn down meanwhile."""
    embed, libpython = embedder(tmp_path, "embed_cuda")
    r = run([embed, libpython, when], env={"CUMEMTRACE_LOG": "debug"}, check=False)
    assert r.returncode == 0 and r.stdout == "allocated\n", (r.returncode, r.stderr[-2000:])
    assert re.search(r"CPython 3\.\d+ found", r.stderr), r.stderr  # it was looked at
    assert device(r.only("exit"))["by_kind"]["device"]["allocs"] == 8


def phase_path(snap, pid):
    ps = {p["id"]: p for p in snap["phases"]["list"]}
    parts = []
    while pid:
        parts.append(ps[pid]["name"])
        pid = ps[pid]["parent"]
    return "/".join(reversed(parts))


@pytest.mark.parametrize("how", ["gil", "nogil", "thread"])
def test_the_peaks_frames_and_thread_are_kept_for_the_layer(run, how):
    # cumemtrace_peak_context: the `self` of the frame (named forward) that
    # reached the peak - the instance, not its sibling of the same class -
    # read directly on 3.11-3.13, with or without the GIL; the allocating
    # thread's name (PyTorch's autograd threads are pt_autograd_N).
    # cumemtrace_peak_phase names that peak once, only for its own time.
    r = run([PYTHON, SCRIPTS / "peak_context.py", BUILD, how])
    out = json.loads(re.search(r"^PEAK (.*)$", r.stdout, re.M).group(1))
    assert out["got"] == 1
    if VERSION[:2] in ((3, 11), (3, 12), (3, 13)):
        assert out["self_in_forward"], out
    assert not out["other_instance"], out
    assert (out["thread"] == "pt_autograd_0") == (how == "thread"), out
    assert (out["stale"], out["named"], out["again"]) == (0, 1, 0), out
    snap = r.only("exit")
    assert phase_path(snap, device(snap)["peak_phase"]) == "forward/Net/blocks.1"
