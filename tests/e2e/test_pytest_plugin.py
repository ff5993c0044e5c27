"""The pytest plugin (python/pytest_cumemtrace), run by pytester in a
subprocess on the simulated GPU: the inner test files allocate through the
simulated runtime with ctypes (PyDLL, so the GIL is held and the tracer sees
their Python lines).  Checks each marker failing and passing, the Python
line in the message, the re-execution under LD_PRELOAD, and that without
the library no outcome changes."""
import json
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import BUILD, LIB, ROOT, SAN_RUNTIME, SIM, base_env
from needs import TORCH_VENV, needs

pytest_plugins = ["pytester"]

PLUGIN_DIR = ROOT / "python"

INNER = '''
import ctypes
import pytest

MiB = 1 << 20
rt = ctypes.PyDLL("libcudart.so.13")


def malloc(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0  # @malloc
    return p


def free(p):
    assert rt.cudaFree(p) == 0


held = []


def spike(n):
    p = malloc(n)  # @spike
    free(p)


@pytest.mark.limit_gpu_memory("16 MiB")
def test_over_budget():
    spike(24 * MiB)  # @over


@pytest.mark.limit_gpu_memory("16 MiB")
def test_within_budget():
    spike(8 * MiB)


@pytest.mark.limit_gpu_leaks("16 MiB")
def test_leaks():
    held.append(malloc(32 * MiB))  # @leak


@pytest.mark.limit_gpu_leaks("16 MiB")
def test_leaks_little():
    held.append(malloc(4 * MiB))


def test_unmarked():
    spike(64 * MiB)
'''


def line_of(tag):
    for n, line in enumerate(INNER.splitlines(), 0):
        if line.rstrip().endswith(f"# @{tag}"):
            return n
    raise AssertionError(tag)


def environ(monkeypatch, preload, lib_env=True, path=None):
    env = base_env(preload=preload)
    if not preload and SAN_RUNTIME:
        env["LD_PRELOAD"] = SAN_RUNTIME
    env["PYTHONPATH"] = str(PLUGIN_DIR)
    env["PATH"] = path if path is not None else os.environ.get("PATH", "")
    if lib_env:
        env["CUMEMTRACE_LIB"] = str(LIB)
    for k in list(os.environ):
        if k not in env:
            monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def run_inner(pytester, *args):
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest_subprocess("-p", "pytest_cumemtrace.plugin", "-p",
                                         "no:cacheprovider", *args, timeout=120)


@needs(LIB.exists(), f"{LIB}", "make builds it")
def test_markers_fail_over_limit_with_python_lines(pytester, monkeypatch):
    environ(monkeypatch, preload=True)
    r = run_inner(pytester, "--cumemtrace", "-rA", f"--cumemtrace-dir={pytester.path}/snaps")
    r.assert_outcomes(passed=3, failed=2)
    out = r.stdout.str()
    assert "libcumemtrace 0.1.0 loaded; GPU-memory markers checked" in out
    assert re.search(r"FAILED test_inner.py::test_over_budget", out)
    assert re.search(r"FAILED test_inner.py::test_leaks\b", out)
    # The peak message: 24 MiB used over a 16 MiB limit, blamed on the
    # spike's line called from the test's line.
    assert "test used 24.00 MiB of GPU memory on device 0 at its peak" in out
    assert "over limit_gpu_memory(16.00 MiB)" in out
    assert re.search(rf"24\.00 MiB\s+1x\s+test_inner\.py:{line_of('malloc')}:malloc < "
                     rf"test_inner\.py:{line_of('spike')}:spike < "
                     rf"test_inner\.py:{line_of('over')}:test_over_budget$", out, re.M), out
    assert "test leaked 32.00 MiB of GPU memory on device 0" in out
    assert re.search(rf"32\.00 MiB\s+1x\s+test_inner\.py:{line_of('malloc')}:malloc < "
                     rf"test_inner\.py:{line_of('leak')}:test_leaks$", out, re.M), out
    assert "details: cumemtrace report " in out
    snaps = sorted(os.listdir(pytester.path / "snaps"))
    assert len(snaps) == 2, snaps


@needs(LIB.exists(), f"{LIB}", "make builds it")
def test_reexecutes_under_the_preload(pytester, monkeypatch):
    environ(monkeypatch, preload=False)
    r = run_inner(pytester, "--cumemtrace")
    assert f"cumemtrace: re-running pytest with LD_PRELOAD={LIB}" in r.stderr.str()
    r.assert_outcomes(passed=3, failed=2)


def test_without_the_library_no_outcome_changes(pytester, monkeypatch):
    environ(monkeypatch, preload=False, lib_env=False, path="/usr/bin:/bin")
    r = run_inner(pytester, "--cumemtrace")
    r.assert_outcomes(passed=5)
    out = r.stdout.str()
    assert "GPU-memory markers NOT checked: libcumemtrace.so not found" in out
    assert "cumemtrace: 4 tests with GPU-memory markers not checked" in out
    assert "LD_PRELOAD=/path/to/libcumemtrace.so" in out


@needs(LIB.exists(), f"{LIB}", "make builds it")
def test_without_the_option_markers_are_only_reported(pytester, monkeypatch):
    environ(monkeypatch, preload=True)
    r = run_inner(pytester)
    r.assert_outcomes(passed=5)
    assert ("cumemtrace: 4 tests with GPU-memory markers not checked: run pytest "
            "with --cumemtrace") in r.stdout.str()


@needs(LIB.exists(), f"{LIB}", "make builds it")
def test_tracing_disabled_leaves_outcomes_alone(pytester, monkeypatch):
    environ(monkeypatch, preload=True)
    monkeypatch.setenv("CUMEMTRACE_DISABLE", "1")
    r = run_inner(pytester, "--cumemtrace")
    r.assert_outcomes(passed=5)
    assert ("cumemtrace: 4 tests with GPU-memory markers not checked: the library refused "
            "to set a mark") in r.stdout.str()


def test_a_malformed_limit_is_a_usage_error(pytester, monkeypatch):
    environ(monkeypatch, preload=False, lib_env=False, path="/usr/bin:/bin")
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.limit_gpu_memory("four gigs")
def test_x():
    pass
''')
    r = pytester.runpytest_subprocess("-p", "pytest_cumemtrace.plugin", "--cumemtrace",
                                      timeout=60)
    r.assert_outcomes(errors=1)
    out = r.stdout.str()
    assert "@pytest.mark.limit_gpu_memory: not a size: 'four gigs'" in out
    # once, without the chained traceback of the ValueError
    errors = out[out.index("= ERRORS ="):out.index("short test summary")]
    assert errors.count("not a size: 'four gigs'") == 1, out
    assert "During handling of the above exception" not in out, out


def test_the_readme_points_to_a_section_that_exists():
    import re
    text = (PLUGIN_DIR / "README.md").read_text()
    [name] = re.findall(r'the "([^"]+)"\s+section of the repository\'s README',
                        " ".join(text.split()))
    headings = [l.lstrip("#").strip() for l in
                (PLUGIN_DIR.parent / "README.md").read_text().splitlines()
                if l.startswith("#")]
    assert name in headings, (name, headings)


def test_sizes_parse_like_the_cli():
    """docs/units.md's rules, its table's every example, and the refusals
    it names: a number without a unit and a fraction of a byte."""
    sys.path.insert(0, str(PLUGIN_DIR))
    try:
        from pytest_cumemtrace.plugin import parse_size
    finally:
        sys.path.remove(str(PLUGIN_DIR))
    table = re.findall(r"^\| `[^|]*\| [^|]*\| ([^|]+)\| ([0-9]+) \|$",
                       (ROOT / "docs" / "units.md").read_text(), re.M)
    assert len(table) == 9, table
    for examples, expected in table:
        for example in re.findall(r"`([^`]+)`", examples):
            assert parse_size(example) == int(expected), example
    assert parse_size("4 GiB") == 4 << 30
    assert parse_size("1.5 GB") == 1500000000
    assert parse_size(" 512 k ") == 512 << 10
    assert parse_size("1.5GiB") == 3 << 29
    assert parse_size("0.1KiB") == 102  # rounded to the nearest byte, as the CLI
    assert parse_size("8B") == 8
    for bad in ("lots", "8", 8, 4096, "1.5b", "1.5 B", "8 GiBs", "", True, 1.5):
        with pytest.raises(ValueError):
            parse_size(bad)
    with pytest.raises(ValueError, match="a size needs a unit"):
        parse_size("8")


def test_a_size_without_a_unit_is_a_usage_error(pytester, monkeypatch):
    environ(monkeypatch, preload=False, lib_env=False, path="/usr/bin:/bin")
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.limit_gpu_leaks("8")
def test_x():
    pass
''')
    r = pytester.runpytest_subprocess("-p", "pytest_cumemtrace.plugin", "--cumemtrace",
                                      timeout=60)
    r.assert_outcomes(errors=1)
    assert ('@pytest.mark.limit_gpu_leaks: a size needs a unit: "8 GiB", "8 MiB" or "8 B", '
            "not '8'") in r.stdout.str()


# ---- real PyTorch on the simulated GPU ----

TORCH_PY = os.environ.get("CUMEMTRACE_TORCH_PYTHON",
                          "/root/.cache/cumemtrace/torch-venv/bin/python")
SIMGPU = ROOT / "scripts" / "simgpu"

TORCH_INNER = '''
import pytest
import torch

held = []


@pytest.mark.limit_gpu_memory("16 MiB")
def test_over_budget():
    x = torch.empty(24 << 20, dtype=torch.uint8, device="cuda")  # @big
    del x


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_leaks():
    held.append(torch.empty(4 << 20, dtype=torch.uint8, device="cuda"))  # @tleak


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_cached_segment_is_not_a_leak():
    x = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
    del x  # the caching allocator keeps the segment: allocated is back where it was
'''


def torch_line(tag):
    for n, line in enumerate(TORCH_INNER.splitlines(), 0):
        if line.rstrip().endswith(f"# @{tag}"):
            return n
    raise AssertionError(tag)


def needs_torch(test):
    """Needs the library, the PyTorch venv and the simulated GPU (needs.py)."""
    for mark in (
            needs(LIB.exists(), f"{LIB}", "make builds it"),
            needs(os.access(TORCH_PY, os.X_OK), f"the PyTorch venv's {TORCH_PY}",
                  TORCH_VENV + "; CUMEMTRACE_TORCH_PYTHON names another"),
            needs(SIMGPU.exists(), "scripts/simgpu", "it is in the repository")):
        test = mark(test)
    return test


def run_torch_suite(pytester, monkeypatch, **files):
    """The suite in `files` under --cumemtrace, with PyTorch on a 1 GiB
    simulated GPU, the library preloaded."""
    environ(monkeypatch, preload=True)
    monkeypatch.setenv("CUMEMTRACE_BUILD", str(BUILD))
    pytester.makepyfile(**files)
    return pytester.run(str(SIMGPU), "--memory", "1GiB", "--", TORCH_PY, "-m", "pytest",
                        "-p", "pytest_cumemtrace.plugin", "-p", "no:cacheprovider",
                        "--cumemtrace", "-rA", timeout=300)


@needs_torch
def test_pytorch_markers(pytester, monkeypatch):
    r = run_torch_suite(pytester, monkeypatch, test_torch_inner=TORCH_INNER)
    out = r.stdout.str()
    assert "libcumemtrace 0.1.0 loaded; GPU-memory markers checked" in out, out + r.stderr.str()
    assert re.search(r"PASSED test_torch_inner.py::test_cached_segment_is_not_a_leak", out), out
    assert re.search(r"FAILED test_torch_inner.py::test_over_budget", out), out
    assert re.search(r"FAILED test_torch_inner.py::test_leaks", out), out
    assert "test used 24.00 MiB of GPU memory on device 0 at its peak" in out, out
    assert re.search(rf"test_torch_inner\.py:{torch_line('big')}:test_over_budget", out), out
    assert ("test leaked 4.00 MiB of GPU memory on device 0 (torch.cuda.memory_allocated "
            "0 B before, 4.00 MiB after)") in out, out


TORCH_REUSE = '''
import pytest
import torch

held = []


def test_makes_the_cache():
    x = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")  # @seg
    del x  # its 8 MiB segment stays cached


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_leaks_into_it():
    held.append(torch.empty(4 << 20, dtype=torch.uint8, device="cuda"))  # @into
'''


@needs_torch
def test_a_leak_in_a_reused_segment_names_the_leaking_line(pytester, monkeypatch):
    """The leaking test's tensor sits in a segment an earlier test
    created, so the segment table names the earlier test's line; the
    message names the line that allocated the tensor still live."""
    r = run_torch_suite(pytester, monkeypatch, test_torch_reuse=TORCH_REUSE)
    out = r.stdout.str()
    line = {tag: n for n, text in enumerate(TORCH_REUSE.splitlines())
            for tag in ("seg", "into") if text.rstrip().endswith(f"# @{tag}")}
    assert re.search(r"FAILED test_torch_reuse.py::test_leaks_into_it", out), out
    tensors = out.split("Tensors it allocated that are still live")[1].split(
        "The caching allocator's segments")[0].split("details:")[0]
    assert f":{line['seg']}:" not in tensors, out
    details = re.search(r"details: cumemtrace report (\S+)", out).group(1)
    snap = json.loads(Path(details).read_text())
    if any(d.get("tensors") for d in snap["devices"]):
        # the snapshot's own groups (the tensor model): the report's line and
        # what it holds in all; the driver's segments are `report --segments`
        assert re.search(rf"4.00 MiB +1x +test_torch_reuse\.py:{line['into']}:"
                         r"test_leaks_into_it +\(the line holds 4.00 MiB in 1 block\)",
                         tensors), out
        assert "The caching allocator's segments" not in out, out
    else:
        # a file without the tensor model: PyTorch's history, then the segments
        assert re.search(rf"4.00 MiB +1x +test_torch_reuse\.py:{line['into']}:"
                         "test_leaks_into_it", tensors), out
        segments = out.split("The caching allocator's segments")[1]
        assert f"test_torch_reuse.py:{line['seg']}:test_makes_the_cache" in segments, out
