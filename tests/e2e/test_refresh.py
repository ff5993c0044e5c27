"""Fresh allocator figures at every dump, without
PyTorch: a stand-in layer in the machine's CPython registers its callable
(cumemtrace_allocator_refresher); each cumemtrace_dump has it report first -
on the main thread itself when the main thread dumps (through ctypes), on
the main thread through Py_AddPendingCall when another thread does - and
the host never sees an exception of ours, but gets a KeyboardInterrupt
raised in it, as a signal handler's would have come (tests/python/refresh.py).
tests/torch/test_dumps.py does the same with PyTorch's real layer."""
import json
import os

from conftest import BUILD, ROOT
from needs import DEPS, needs

PYTHON = os.environ.get("CUMEMTRACE_TEST_PYTHON", "/usr/bin/python3")
SCRIPT = ROOT / "tests" / "python" / "refresh.py"

pytestmark = needs(os.access(PYTHON, os.X_OK), f"CPython at {PYTHON}", DEPS + " (python3)")


def asked(run, mode):
    r = run([PYTHON, SCRIPT, BUILD, mode])
    snap = json.loads((r.cwd / "cumemtrace.asked.json").read_text())
    dev = next(d for d in snap["devices"] if d["ordinal"] == 0)
    return r.stdout.strip(), snap.get("allocator_refresh"), dev["allocator"]


def test_a_dump_from_the_main_thread_refreshes_on_it(run):
    out, refresh, a = asked(run, "api")
    assert out == "host saw nothing; refresh ran 1 time(s), on the main thread: True"
    assert refresh["answered"] is True and refresh["direct"] is True, refresh
    assert a["name"] == "stand-in" and a["allocated_bytes"] == 1, a
    assert refresh["asked_ns"] <= a["reported_ns"]


def test_a_dump_from_another_thread_has_the_main_thread_refresh(run):
    out, refresh, a = asked(run, "thread")
    assert out == "host saw nothing; refresh ran 1 time(s), on the main thread: True"
    assert refresh["answered"] is True and refresh["direct"] is False, refresh
    assert refresh["waited_ns"] < 200e6, refresh
    assert a["allocated_bytes"] == 1, a


def test_the_layers_exception_never_reaches_the_host(run):
    out, refresh, a = asked(run, "error")
    assert out == "host saw nothing; refresh ran 1 time(s), on the main thread: True"
    assert refresh["answered"] is True, refresh
    assert a is None  # it reported nothing


def test_a_keyboard_interrupt_raised_in_it_reaches_the_host(run):
    out, refresh, a = asked(run, "interrupt")
    assert out.startswith("host saw KeyboardInterrupt;"), out


def test_without_a_layer_nothing_is_asked(run):
    out, refresh, a = asked(run, "none")
    assert refresh is None and a is None


def report(path):
    import subprocess
    from conftest import CLI
    r = subprocess.run([str(CLI), "report", str(path)], capture_output=True, text=True,
                       timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    return " ".join(r.stdout.split())


def test_the_report_says_how_old_figures_are_that_did_not_come_in_time(run, tmp_path):
    r = run([PYTHON, SCRIPT, BUILD, "thread"])
    snap = json.loads((r.cwd / "cumemtrace.asked.json").read_text())
    assert "older than this snapshot" not in report(r.cwd / "cumemtrace.asked.json")
    dev = next(d for d in snap["devices"] if d["ordinal"] == 0)
    snap["allocator_refresh"].update(answered=False, waited_ns=200_000_000)
    dev["allocator"]["reported_ns"] = snap["process"]["dump_time_ns"] - 2_500_000_000
    late = tmp_path / "late.json"
    late.write_text(json.dumps(snap))
    assert ("PyTorch's figures here are 2.50 s older than this snapshot: the PyTorch layer "
            "did not answer within 200.0 ms (Python's main thread runs it between two "
            "bytecodes") in report(late)
    dev["allocator"] = None
    late.write_text(json.dumps(snap))
    assert "PyTorch's figures are missing: the PyTorch layer did not answer within 200.0 ms" \
        in report(late)
    # answered, but read long before (a stream's checkpoint): the age alone
    snap["allocator_refresh"] = None
    dev["allocator"] = json.loads((r.cwd / "cumemtrace.asked.json").read_text())[
        "devices"][0]["allocator"]
    dev["allocator"]["reported_ns"] = snap["process"]["dump_time_ns"] - 3_000_000_000
    late.write_text(json.dumps(snap))
    assert "PyTorch's figures here are 3.00 s older than this snapshot (read when" \
        in report(late)
