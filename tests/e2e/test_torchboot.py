"""The PyTorch layer's start-up hook (src/torchboot/, put on PYTHONPATH by
`cumemtrace run`) must leave a process without torch exactly as it was: the
same sys.path, the host's own sitecustomize still run, nothing on stderr, no
torch imported.  (With torch it attaches the OOM observer: tests/torch.)"""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import CLI, SAN_RUNTIME, SIM, base_env, run_env
from needs import DEPS, needs

PYTHON = "/usr/bin/python3"
pytestmark = needs(os.access(PYTHON, os.X_OK), f"CPython at {PYTHON}", DEPS + " (python3)")

# Everything of the interpreter's own state a program may look at (issue
# 24, item 19): under `cumemtrace run` each must equal the bare run's.
PROBE = ("import json, os, sys; print(json.dumps({'path': sys.path, "
         "'modules': sorted(sys.modules), 'meta_path': [repr(type(f)) for f in sys.meta_path], "
         "'pythonpath': os.environ.get('PYTHONPATH'), "
         "'env': sorted(k for k in os.environ if k.startswith('CUMEMTRACE_PYTHONPATH')), "
         "'torch': 'torch' in sys.modules, 'boot': 'cumemtrace_torch' in sys.modules, "
         "'site': 'sitecustomize' in sys.modules, "
         "'host': getattr(sys.modules.get('sitecustomize'), 'HOST_MARK', None)}))")


def probe(tmp_path, traced, pythonpath=None, flags=(), env_extra=None, code=PROBE, shell=False):
    env = run_env() if traced else base_env(preload=False)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    env.update(env_extra or {})
    cmd = [PYTHON, *flags, "-c", code]
    if shell:  # `run` sees a shell, not the Python it starts
        import shlex
        cmd = ["sh", "-c", shlex.join(cmd)]
    if traced:
        cmd = [str(CLI), "run", "--output", f"{tmp_path}/", "--"] + cmd
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1]), r.stderr


def test_a_process_without_torch_is_untouched(tmp_path):
    bare, _ = probe(tmp_path, False)
    traced, err = probe(tmp_path, True)
    assert traced == bare  # sys.path, sys.modules, sys.meta_path, PYTHONPATH
    assert bare["boot"] is False and bare["env"] == []
    assert "warning" not in err and "PyTorch" not in err, err


@pytest.mark.parametrize("pythonpath", ["", "/nonexistent/a:/nonexistent/b"])
def test_the_hosts_pythonpath_is_as_it_set_it(tmp_path, pythonpath):
    bare, _ = probe(tmp_path, False, pythonpath)
    traced, _ = probe(tmp_path, True, pythonpath)
    assert traced == bare and bare["pythonpath"] == pythonpath


@pytest.mark.parametrize("flags", [["-S"], ["-I"], ["-E"], ["-bS"], ["-W", "ignore", "-S"]])
def test_python_without_site_sees_nothing_of_ours(tmp_path, flags):
    bare, _ = probe(tmp_path, False, flags=flags)
    traced, _ = probe(tmp_path, True, flags=flags)
    assert traced == bare


@pytest.mark.parametrize("flags", [["-S"], ["-I"], ["-E"], ["-bE"]])
@pytest.mark.parametrize("pythonpath", [None, "/nonexistent/a"])
def test_python_without_site_behind_a_shell_sees_nothing_of_ours(tmp_path, flags, pythonpath):
    # The shell gets our PYTHONPATH; the Python it starts never runs our
    # sitecustomize, so the library gives it back its own before it reads it.
    bare, _ = probe(tmp_path, False, pythonpath, flags=flags, shell=True)
    traced, _ = probe(tmp_path, True, pythonpath, flags=flags, shell=True)
    assert traced == bare and bare["pythonpath"] == pythonpath


def test_the_hosts_sitecustomize_still_runs(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("HOST_MARK = 'ran'\n")
    bare, _ = probe(tmp_path, False, str(site))
    traced, err = probe(tmp_path, True, str(site))
    assert bare["host"] == "ran" and traced == bare


def traceback_of(err):
    """The lines from site's traceback (or its one-line message) on."""
    lines = err.splitlines()
    start = next((i for i, l in enumerate(lines)
                  if l.startswith(("Traceback", "Error in sitecustomize"))), len(lines))
    end = max((i for i, l in enumerate(lines) if "host broke" in l), default=len(lines))
    return lines[start:end + 1]


@pytest.mark.parametrize("verbose", [False, True])
def test_a_failing_host_sitecustomize_fails_as_without_us(tmp_path, verbose):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("def f():\n    raise RuntimeError('host broke')\n"
                                           "f()\n")
    extra = {"PYTHONVERBOSE": "1"} if verbose else {}
    bare, bare_err = probe(tmp_path, False, str(site), env_extra=extra)
    traced, err = probe(tmp_path, True, str(site), env_extra=extra)
    assert traced == bare
    want = traceback_of(bare_err)
    assert want[-1] == "RuntimeError: host broke" and len(want) > (5 if verbose else 1), bare_err
    assert traceback_of(err) == want, err


# A stand-in torch package: torch.cuda defines the names the layer queues
# its observer with, then imports more (as the real one does).  A program
# that probes for torch with importlib.util.find_spec before importing it,
# as transformers' is_torch_available does, still gets
# the layer's observer queued - and no module of ours.
FAKE_CUDA = ("_queued_calls = []\n"
             "def is_initialized():\n    return False\n"
             "def _lazy_call(fn):\n    _queued_calls.append(fn)\n"
             "import colorsys  # a module not imported before\n")
FIND_SPEC = ("import importlib.util, json, sys\n"
             "found = importlib.util.find_spec('torch') is not None\n"
             "import torch\n"
             "print(json.dumps({'found': found, 'queued': len(torch.cuda._queued_calls), "
             "'boot': 'cumemtrace_torch' in sys.modules, "
             "'meta_path': [repr(type(f)) for f in sys.meta_path]}))\n")


def test_find_spec_before_import_keeps_the_layer(tmp_path):
    pkg = tmp_path / "lib" / "torch"
    (pkg / "cuda").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import torch.cuda\n")
    (pkg / "cuda" / "__init__.py").write_text(FAKE_CUDA)
    lib = str(tmp_path / "lib")
    bare, _ = probe(tmp_path, False, lib, code=FIND_SPEC)
    traced, err = probe(tmp_path, True, lib, code=FIND_SPEC)
    assert bare == {**traced, "queued": 0} and bare["found"], (bare, traced)
    assert traced["queued"] == 1, err


PLAIN = ("import ctypes, json, sys, os\n"
         "before = list(sys.path)\n"
         "rt = ctypes.CDLL(os.path.join(sys.argv[1], 'libcudart.so.13'))\n"
         "p = ctypes.c_void_p()\n"
         "assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0\n"
         "for _ in range(1000): pass  # a safe point for the pending call\n"
         "print(json.dumps({'boot': 'cumemtrace_torch' in sys.modules,\n"
         "                  'same_path': sys.path == before,\n"
         "                  'main': sorted(k for k in globals() if not k.startswith('__'))}))\n")


def test_plain_ld_preload_leaves_a_process_without_torch_alone(tmp_path):
    # No `cumemtrace run`: the library asks CPython (Py_AddPendingCall) to
    # load the layer at a safe point after an allocation - only once torch
    # is imported (tests/torch checks that case); here nothing may run.
    r = subprocess.run([PYTHON, "-c", PLAIN, str(SIM)], cwd=tmp_path, env=base_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["boot"] is False and out["same_path"] is True
    assert out["main"] == ["_", "before", "ctypes", "json", "os", "p", "rt", "sys"]
    assert "warning" not in r.stderr, r.stderr


# The layer's Facts handed to the library by hand (what its observer does
# with PyTorch's figures), without torch: top_tensors as the library keeps
# them, and a struct of another size (another build's) refused, said once.
FACTS = r"""
import ctypes, sys
sys.path.insert(0, sys.argv[1])
import cumemtrace_torch
ct = cumemtrace_torch.part("library")
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0
oom = ct.facts_fn()
long = "\n".join(f"/deep/module{i}.py:{i}:f{i}" for i in range(100))
def facts(sites, size=None):
    f = ct.Facts()
    f.size = size or ctypes.sizeof(ct.Facts)
    f.name, f.version, f.config = b"pytorch", b"2.15", b""
    f.requested_bytes, f.allocated_bytes, f.reserved_bytes = 8 << 30, 64 << 20, 64 << 20
    f.limit_bytes = 100 << 20
    arr = (ct.TensorSite * 8)()
    for i, (stack, nbytes, count) in enumerate(sites):
        arr[i].stack, arr[i].bytes, arr[i].count = stack.encode(), nbytes, count
    f.top_tensors, f.ntop_tensors = arr, len(sites)
    return f, arr
sites = [("/w/train.py:12:forward\n/w/train.py:40:<module>", 48 << 20, 2),
         ("", 10 << 20, 1), (long, 4 << 20, 1)] + [("/w/x.py:1:g", 1, 1)] * 5
f, keep = facts(sites)
assert oom(0, ctypes.byref(f)) == 0
f, keep = facts(sites[:1], size=ct.Facts.top_tensors.offset)
assert oom(0, ctypes.byref(f)) == -1  # another build's struct: refused, said once
"""


def test_top_tensors_reach_the_post_mortem(tmp_path):
    boot = SIM.parent / "share" / "cumemtrace" / "torchboot"
    r = subprocess.run([PYTHON, "-c", FACTS, str(boot)], cwd=tmp_path,
                       env=base_env({"SIMCUDA_MEMORY": "1GiB"}), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pms = sorted(tmp_path.glob("cumemtrace.*.oom.*.json"))
    assert len(pms) == 1, r.stderr
    assert r.stderr.count("come from different builds") == 1, r.stderr
    [first] = [json.loads(p.read_text())["oom"]["allocator"] for p in pms]
    top = first["top_tensors"]
    assert [(t["bytes"], t["count"]) for t in top] == \
        [(48 << 20, 2), (10 << 20, 1), (4 << 20, 1), (1, 1), (1, 1)]  # the first 5
    assert top[0]["stack"] == [{"file": "/w/train.py", "line": 12, "function": "forward"},
                               {"file": "/w/train.py", "line": 40, "function": "<module>"}]
    assert top[1]["stack"] == []
    deep = top[2]["stack"]  # cut to whole frames, innermost kept
    assert 10 < len(deep) < 100 and deep[0] == {"file": "/deep/module0.py", "line": 0,
                                                "function": "f0"}
    assert deep == [{"file": f"/deep/module{i}.py", "line": i, "function": f"f{i}"}
                    for i in range(len(deep))]
    rep = subprocess.run([str(CLI), "report", str(pms[0])], capture_output=True, text=True,
                         timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"})
    text = " ".join(rep.stdout.split())
    assert "tensors: 48.0 MiB in 2 tensors from train.py:12:forward <" in text, rep.stdout
    full = subprocess.run([str(CLI), "report", "--full", str(pms[0])], capture_output=True,
                          text=True, timeout=60, env={"NO_COLOR": "1"}).stdout
    assert "48.0 MiB in 2 tensors from train.py:12:forward < train.py:40:<module>" in full
    assert "10.0 MiB in 1 tensor from no Python stack (allocated off the Python thread, " \
        "e.g. by autograd's backward)" in text
    # diff says the same of that row: not known to be autograd's, no more
    diff = subprocess.run([str(CLI), "diff", str(pms[0]), str(pms[0])], capture_output=True,
                          text=True, timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert "10.0 MiB 10.0 MiB 0 B 1 -> 1 no Python stack" in " ".join(diff.stdout.split()), \
        diff.stdout
    assert "by autograd's backward)" in diff.stdout and "backward thread" not in diff.stdout, \
        diff.stdout


# A sub-interpreter that imports ctypes clears the pointer-type cache that
# CPython 3.11 shares between interpreters; a POINTER(Block) made after that
# is another type, which the Segment field made before refuses ("LP_Block
# instance instead of LP_Block instance") - the layer's segment layout then
# went off for the rest of the run.
SUBINTERP_LAYOUT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import cumemtrace_torch
layout = cumemtrace_torch.part("layout")
import _xxsubinterpreters as interpreters
sub = interpreters.create()
interpreters.run_string(sub, "import ctypes")
interpreters.destroy(sub)
got = []
def handed(device, tag, arr, n, stacks, nstacks):
    got.append([(arr[i].nblocks, arr[i].blocks[0].size) for i in range(n)])
snap = [{"device": 0, "address": 1 << 32, "total_size": 2 << 20, "segment_type": "large",
         "blocks": [{"address": 1 << 32, "size": 1 << 20, "state": "active_allocated"},
                    {"address": (1 << 32) + (1 << 20), "size": 1 << 20, "state": "inactive"}]}]
layout.segments(None, 0, -1, handed, snap)
print(got)
"""


def test_the_layout_survives_a_sub_interpreter_importing_ctypes(tmp_path):
    boot = SIM.parent / "share" / "cumemtrace" / "torchboot"
    r = subprocess.run([PYTHON, "-c", SUBINTERP_LAYOUT, str(boot)], cwd=tmp_path,
                       env=base_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[[(2, 1048576)]]", r.stdout


FIT_WITHOUT_RESET = r"""
import sys, types
sys.path.insert(0, sys.argv[1])
torch = types.ModuleType("torch")
torch.__version__ = "2.0.0"
torch._C = types.SimpleNamespace()  # no _cuda_resetPeakMemoryStats
sys.modules["torch"] = torch
import cumemtrace_torch
cumemtrace_torch.part("fit").start(torch)
print("started")
"""


def test_fit_without_pytorchs_reset_says_so_once_and_goes_on(tmp_path):
    """Under `cumemtrace fit` the layer wraps PyTorch's private
    _cuda_resetPeakMemoryStats; a PyTorch without it raised AttributeError
    out of the layer's start (run inside CUDA's lazy initialisation, which
    raises it into the program).  Now one warning names it."""
    boot = SIM.parent / "share" / "cumemtrace" / "torchboot"
    env = base_env(preload=False)
    env["CUMEMTRACE_FIT_REPORT"] = str(tmp_path / "fit.json")
    r = subprocess.run([PYTHON, "-c", FIT_WITHOUT_RESET, str(boot)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "started\n", r.stderr
    assert r.stderr.splitlines() == [
        "cumemtrace: warning: PyTorch 2.0.0 has no torch._C._cuda_resetPeakMemoryStats: "
        "fit's PyTorch peaks are those since the script's last reset_peak_memory_stats()"], \
        r.stderr


EVENTS = ("import sys\n"
          "if sys.argv[2] != '-':\n"
          "    sys.path.insert(0, sys.argv[2])\n"
          "    import torch  # a stand-in: torch.cuda with what the layer waits for\n"
          "for _ in range(int(sys.argv[1])):\n"
          "    id(sys)\n")


def _instructions(tmp_path, traced, n, lib):
    """Callgrind's count for a program that raises `n` audited events
    (builtins.id), bare or under `cumemtrace run`, with the stand-in torch
    in `lib` imported first (or none: "-")."""
    env = run_env() if traced else base_env(preload=False)
    env.pop("PYTHONPATH", None)
    # One hash seed for every run: with random ones CPython's start-up
    # (dicts, sets, interned strings) varies by millions of instructions a
    # run, which moved the slope by a hundred or more an event.
    env["PYTHONHASHSEED"] = "0"
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
           PYTHON, "-c", EVENTS, str(n), lib]
    if traced:
        cmd = [str(CLI), "run", "--output", f"{tmp_path}/", "--"] + cmd
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    m = re.search(r"Collected : (\d+)", r.stderr)
    assert r.returncode == 0 and m, r.stderr[-2000:]
    assert "warning" not in r.stderr, r.stderr
    return int(m.group(1))


@pytest.mark.instructions  # make test-quick skips it (conftest.py)
@pytest.mark.skipif(SAN_RUNTIME is not None or shutil.which("valgrind") is None,
                    reason="needs valgrind and an uninstrumented build")
@pytest.mark.parametrize("torch", [False, True])
def test_an_audited_event_costs_little(tmp_path, torch):
    # What each audited event of the process pays for us, in instructions
    # (slope between n and 3n events, traced less bare).  Until torch.cuda
    # is imported the library's audit hook is in: CPython builds each
    # event's arguments and calls it (a name compared), about 520 measured
    # with python3.11.  Once it has loaded the layer it takes itself out:
    # nothing.  Before, `run`'s sitecustomize added a Python audit hook,
    # some 1,300 an event for the process's whole life.
    lib = "-"
    if torch:
        pkg = tmp_path / "lib" / "torch"
        (pkg / "cuda").mkdir(parents=True)
        (pkg / "__init__.py").write_text("import torch.cuda\n")
        (pkg / "cuda" / "__init__.py").write_text(FAKE_CUDA)
        lib = str(tmp_path / "lib")
    n = 20000
    slope = {t: (_instructions(tmp_path, t, 3 * n, lib) - _instructions(tmp_path, t, n, lib))
             / (2 * n) for t in (False, True)}
    added = slope[True] - slope[False]
    print(f"instructions an audited event adds (torch.cuda imported: {torch}): {added:.0f} "
          f"(bare loop {slope[False]:.0f})")
    # Once out, nothing is added: the slopes of two runs then differ by some
    # tens of instructions either way (-14 and +31 measured), so the bound
    # is 100, well below the ~370 the hook costs while it stays in.
    assert added < (100 if torch else 580), slope
