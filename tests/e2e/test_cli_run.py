"""`cumemtrace run`: finding the library, the environment it passes, the
manifest of snapshots written by a whole process tree, exit status and
signals.  The real libcumemtrace.so is not needed: a stand-in library built
here honours the manifest contract (docs/cli.md) - on load, each process
appends "<absolute path>\\n" with one write() to $CUMEMTRACE_MANIFEST."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from needs import DEPS, missing, needs

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
CLI = BUILD / "cumemtrace"

pytestmark = needs(CLI.exists(), f"{CLI}", "make cli builds it")

STAND_IN = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void announce(void)
{
    const char *m = getenv("CUMEMTRACE_MANIFEST");
    const char *dir = getenv("STAND_IN_DIR");
    if (m == NULL || dir == NULL)
        return;
    char line[4096];
    /* a record as the library writes it (src/preload/write/output.c) */
    int head = snprintf(line, sizeof line, "wrote %d exit ", (int)getpid());
    int n = head + snprintf(line + head, sizeof line - (size_t)head,
                            "%s/cumemtrace.stand-in.%d.json\n", dir, (int)getpid());
    line[n - 1] = '\0';
    close(open(line + head, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)); /* run lists files that exist */
    line[n - 1] = '\n';
    int fd = open(m, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) != n) {}
        /* the same file twice: run must print it once */
        if (getenv("STAND_IN_TWICE") && write(fd, line, (size_t)n) != n) {}
        close(fd);
    }
}
"""


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    d = tmp_path_factory.mktemp("standin")
    src = d / "standin.c"
    src.write_text(STAND_IN)
    lib = d / "libcumemtrace.so"
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        missing("a C compiler (cc) to build the stand-in library", DEPS + " (gcc)")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


@pytest.fixture
def tree(tmp_path, stand_in):
    """A copy of the CLI with the stand-in library beside it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(CLI, bindir / "cumemtrace")
    shutil.copy(stand_in, bindir / "libcumemtrace.so")
    out = tmp_path / "out"
    out.mkdir()
    return bindir / "cumemtrace", out


def run(cli, *args, env=None, **kw):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.pop("CUMEMTRACE_LIB", None)
    e.update(env or {})
    return subprocess.run([str(cli), "run", *args], capture_output=True, text=True, env=e,
                          timeout=60, **kw)


def test_env_and_library_next_to_binary(tree):
    cli, out = tree
    r = run(cli, "--output", "/tmp/x/%p.json", "--limit", "24GiB", "--depth", "16", "--",
            "sh", "-c", 'echo "$LD_PRELOAD|$CUMEMTRACE_OUTPUT|$CUMEMTRACE_LIMIT|'
                        '$CUMEMTRACE_DEPTH|$CUMEMTRACE_MANIFEST"',
            env={"STAND_IN_DIR": str(out)})
    assert r.returncode == 0, r.stderr
    preload, output, limit, depth, manifest = r.stdout.strip().split("|")
    assert preload == str(cli.parent.resolve() / "libcumemtrace.so")
    assert (output, limit, depth) == ("/tmp/x/%p.json", "24GiB", "16")
    assert manifest and not os.path.exists(manifest), "the manifest is removed afterwards"


def test_preload_prepends(tree, tmp_path):
    cli, out = tree
    r = run(cli, "sh", "-c", 'echo "$LD_PRELOAD"', env={"LD_PRELOAD": "libother.so"})
    assert r.stdout.strip() == str(cli.parent.resolve() / "libcumemtrace.so") + ":libother.so"


def test_preload_keeps_sanitizer_runtime_first(tree):
    cli, out = tree
    r = run(cli, "sh", "-c", 'echo "$LD_PRELOAD"',
            env={"LD_PRELOAD": "liba.so /usr/lib/x86_64-linux-gnu/libasan.so.8:libb.so",
                 "ASAN_OPTIONS": "verify_asan_link_order=0"})
    ours = str(cli.parent.resolve() / "libcumemtrace.so")
    assert r.stdout.strip() == ("/usr/lib/x86_64-linux-gnu/libasan.so.8:" + ours
                                + ":liba.so:libb.so")


def test_library_in_prefix_lib(tmp_path, stand_in):
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    shutil.copy(CLI, tmp_path / "bin" / "cumemtrace")
    shutil.copy(stand_in, tmp_path / "lib" / "libcumemtrace.so")
    r = run(tmp_path / "bin" / "cumemtrace", "sh", "-c", 'echo "$LD_PRELOAD"', cwd="/")
    assert r.stdout.strip() == str((tmp_path / "lib" / "libcumemtrace.so").resolve())


def test_library_missing(tmp_path):
    shutil.copy(CLI, tmp_path / "cumemtrace")
    r = run(tmp_path / "cumemtrace", "true")
    assert r.returncode == 2 and r.stdout == ""
    assert "libcumemtrace.so not found" in r.stderr
    assert str(tmp_path / "libcumemtrace.so") in r.stderr
    assert str(tmp_path / ".." / "lib" / "libcumemtrace.so") in r.stderr
    assert r.stderr.count("\n") == 1


def test_cumemtrace_lib_overrides_the_one_beside(tree, tmp_path, stand_in):
    cli, out = tree
    other = tmp_path / "other" / "libcumemtrace.so"
    other.parent.mkdir()
    shutil.copy(stand_in, other)
    r = run(cli, "sh", "-c", 'echo "$LD_PRELOAD"', env={"CUMEMTRACE_LIB": str(other)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(other.resolve())


def test_cumemtrace_lib_missing_is_an_error_not_a_fallback(tree, tmp_path):
    cli, out = tree  # a library beside the CLI that must not be used instead
    for bad in (tmp_path / "nowhere.so", tmp_path):
        r = run(cli, "true", env={"CUMEMTRACE_LIB": str(bad)})
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert f"looked in CUMEMTRACE_LIB={bad} (" in r.stderr
        assert r.stderr.count("\n") == 1, r.stderr


def test_manifest_of_a_process_tree(tree):
    cli, out = tree
    # sh, two children and a grandchild: four processes load the library.
    r = run(cli, "--", "sh", "-c", "/bin/true & sh -c /bin/true & wait",
            env={"STAND_IN_DIR": str(out), "STAND_IN_TWICE": "1"})
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == "cumemtrace: 4 snapshots written:", r.stderr
    files = [l.strip() for l in lines[1:]]
    assert len(files) == len(set(files)) == 4
    assert all(f.startswith(str(out) + "/cumemtrace.stand-in.") for f in files)


def test_manifest_lists_only_the_records_the_library_writes(tree):
    cli, out = tree
    # a line with no keyword and pid continues the record before it (a path
    # that holds a newline); it is never a file of its own, even one that
    # exists, so what a child appends to the list is not reported as written
    stray = out / "stray.json"
    stray.write_text("{}")
    r = run(cli, "--", "sh", "-c", 'echo "$1" >> "$CUMEMTRACE_MANIFEST"', "sh", str(stray))
    assert r.returncode == 0, r.stderr
    assert str(stray) not in r.stderr, r.stderr
    assert "no snapshot written" in r.stderr, r.stderr


def test_no_snapshot(tree):
    cli, _ = tree
    r = run(cli, "true")  # STAND_IN_DIR unset: the stand-in writes nothing
    assert r.returncode == 0
    assert "no snapshot written" in r.stderr


def test_exit_status_and_exec_failure(tree):
    cli, _ = tree
    assert run(cli, "sh", "-c", "exit 7").returncode == 7
    r = run(cli, "/nonexistent/program")
    assert r.returncode == 127 and "cannot run '/nonexistent/program'" in r.stderr


def test_child_killed_by_signal(tree):
    cli, _ = tree
    r = run(cli, "sh", "-c", "kill -TERM $$")
    assert r.returncode == -signal.SIGTERM  # we die of the same signal


def test_forwards_sigterm(tree):
    cli, out = tree
    e = dict(os.environ, STAND_IN_DIR=str(out))
    e.pop("LD_PRELOAD", None)
    p = subprocess.Popen([str(cli), "run", "sh", "-c",
                          'trap "exit 42" TERM; echo ready; while :; do sleep 0.05; done'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.1)
    p.send_signal(signal.SIGTERM)  # to cumemtrace only; it passes it on
    stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 42, stderr
    assert "snapshots written" in stderr  # sh and its sleeps


def test_usage_errors(tree):
    cli, _ = tree
    for args, msg in [((), "no command given"), (("--limit", "lots", "true"), "--limit"),
                      (("--depth", "257", "true"), "--depth"), (("--bogus", "true"), "unknown")]:
        r = run(cli, *args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    # options after the command belong to the command
    r = run(cli, "sh", "-c", 'echo "$@"', "sh", "--limit", "x")
    assert r.returncode == 0 and r.stdout.strip() == "--limit x"


def test_nvtx_injection_is_set(tree):
    cli, out = tree
    r = run(cli, "sh", "-c", 'echo "$NVTX_INJECTION64_PATH"',
            env={"STAND_IN_DIR": str(out), "NVTX_INJECTION64_PATH": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(cli.parent.resolve() / "libcumemtrace.so")
    assert "NVTX" not in r.stderr


def test_nvtx_injection_the_user_set_is_kept(tree):
    cli, out = tree
    r = run(cli, "sh", "-c", 'echo "$NVTX_INJECTION64_PATH"',
            env={"STAND_IN_DIR": str(out), "NVTX_INJECTION64_PATH": "/opt/nsight/libinj.so"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "/opt/nsight/libinj.so"
    said = [l for l in r.stderr.splitlines() if "NVTX_INJECTION64_PATH" in l]
    assert len(said) == 1 and "/opt/nsight/libinj.so" in said[0], r.stderr
