"""The library keeps no descriptor at a number the host would use: a host
that reuses low numbers after its first CUDA call (dup2 of its log onto
3-9, or closing every fd and opening its own files) must find only its own
bytes in its files, and under a low `ulimit -n` it must be able to open as
many files as untraced.  Each test runs the host bare and traced and
compares (tests/progs/rt_hostfds.c)."""
import re
import resource
import subprocess

from conftest import PROGS, base_env, run_env

PROG = PROGS / "rt_hostfds"
# the library at work while the host uses those numbers: a dump through the
# API, stream checkpoints every 50 ms, a SIGUSR1 snapshot
TRACED = {"CUMEMTRACE_SIGNAL": "SIGUSR1", "CUMEMTRACE_FLUSH_MS": "50",
          "CUMEMTRACE_STREAM": "keep"}


def host(args, cwd, traced, nofile=None):
    def limit():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    r = subprocess.run([str(PROG), *map(str, args)], cwd=cwd,
                       env=base_env(TRACED if traced else None, preload=traced),
                       capture_output=True, text=True, timeout=60, preexec_fn=limit)
    assert r.returncode == 0, r.stderr
    return r


def test_a_log_dup2ed_onto_low_numbers_gets_only_the_hosts_bytes(tmp_path):
    logs = {}
    for traced in (False, True):
        d = tmp_path / ("traced" if traced else "bare")
        d.mkdir()
        r = host(["dup2", "log"], d, traced)
        logs[traced] = (d / "log").read_bytes()
    assert logs[True] == logs[False]
    assert logs[False].count(b"host ") == 12  # fds 3-9 but the log's own
    assert all(l.startswith(b"host ") for l in logs[True].splitlines()), logs[True][:200]
    reasons = sorted(p.name.split(".")[3] for p in d.glob("cumemtrace.*.json"))
    assert reasons == ["api", "json", "signal"], (reasons, r.stderr)
    assert list(d.glob("cumemtrace.*.stream"))


def test_a_host_that_closes_every_fd_and_reopens_keeps_its_files(tmp_path):
    files = {}
    for traced in (False, True):
        d = tmp_path / ("traced" if traced else "bare")
        (d / "own").mkdir(parents=True)
        r = host(["reopen", d / "own"], d, traced)
        files[traced] = {p.name: p.read_bytes() for p in (d / "own").iterdir()}
    assert len(files[False]) == len(files[True]) == 8
    # Each file holds the host's two lines and nothing of ours.  Its number
    # is the one bare gets, except that an open of the host's racing one of
    # our short-lived descriptors (a stream flush, a checkpoint's memfd) can
    # land on the next free number, and the host's next open on the one we
    # then gave back: open() takes the lowest free number and no call
    # places a descriptor above a floor (docs/design.md says so).  At most
    # one low number is ours at a time, so the host's 8 stay within 3-11.
    numbers = {}
    for name, data in files[True].items():
        m = re.fullmatch(rb"host before (\d+)\nhost after \1\n", data)
        assert m, (name, data[:200], files[False][name])
        numbers[name] = int(m.group(1))
    assert len(set(numbers.values())) == 8 and max(numbers.values()) <= 11, numbers
    reasons = sorted(p.name.split(".")[3] for p in d.glob("cumemtrace.*.json"))
    assert reasons == ["api", "json", "signal"], (reasons, r.stderr)
    [stream] = d.glob("cumemtrace.*.stream")
    assert stream.stat().st_size > 100  # checkpoints went on after the close


def test_a_low_open_file_limit_leaves_the_host_every_descriptor(tmp_path):
    """rt_hostfds count opens /dev/null until EMFILE after its first CUDA
    call: the same count bare and traced (a pipe and a stream kept for the
    process's life took 4 of 64)."""
    got = {}
    for traced in (False, True):
        d = tmp_path / ("traced" if traced else "bare")
        d.mkdir()
        r = host(["count"], d, traced, nofile=64)
        got[traced] = int(r.stdout)
    # one fewer only while one of our short-lived descriptors (a stream
    # flush every 50 ms here) is open at the moment the host counts; the
    # descriptors kept for the process's life took 2-6 before
    assert got[False] - 1 <= got[True] <= got[False] and got[False] > 50, got
    # the host ends holding every descriptor: the exit snapshot cannot be
    # written, and the one line says why and what to do (a directory is not it)
    if got[True] == got[False]:
        assert "the process had no descriptor left: raise the open-file limit" in r.stderr, \
            r.stderr
    assert "writable directory" not in r.stderr, r.stderr


PYTHON_HOST = """
import ctypes, os, sys
rt = ctypes.CDLL('libcudart.so.13')  # CDLL: the GIL is released around each call
kept = []

def alloc(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n << 20)) == 0
    kept.append(p)

def a(n): alloc(n)
def b(n): a(n)
def c(n): b(n)

alloc(1)
log = os.open('log', os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
fds = [fd for fd in range(3, 64) if fd != log]
for fd in fds:
    os.dup2(log, fd)
for i in range(24):  # stacks new to the Python reader, which verifies them
    (a, b, c)[i % 3](1 + i % 5)
for fd in fds:
    os.write(fd, b'host %d\\n' % fd)
"""


def test_a_python_hosts_log_dup2ed_low_gets_only_its_bytes(tmp_path):
    """The Python frame reader's memfds (the faulthandler text of a thread
    without the GIL, and the probe that verifies the interpreter's layout)
    were taken at the lowest free numbers: a Python host that dup2()ed its
    log there got 8 bytes of its own memory in it (the probe's write) and
    lost one of those descriptors (closed by the probe's end: EBADF)."""
    import sys
    logs = {}
    for traced in (False, True):
        d = tmp_path / ("traced" if traced else "bare")
        d.mkdir()
        r = subprocess.run([sys.executable, "-c", PYTHON_HOST], cwd=d,
                           # bare: an instrumented build's simulated runtime
                           # still needs its sanitizer runtime first
                           env=base_env(TRACED) if traced else run_env(),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        logs[traced] = (d / "log").read_bytes()
    assert logs[True] == logs[False] and logs[False].count(b"host ") == 60
    assert all(l.startswith(b"host ") for l in logs[True].splitlines()), logs[True][:200]
