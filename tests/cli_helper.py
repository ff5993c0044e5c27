"""cli(): the one way the test suites (tests/e2e, tests/torch: their
conftest.py puts this directory on sys.path) run the cumemtrace CLI."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("CUMEMTRACE_BUILD", ROOT / "build"))
CLI = BUILD / "cumemtrace"


def cli(*args, env=None, cwd=None, check=False, timeout=120):
    """Runs `cumemtrace ARGS...` (each str()'d) and returns the finished
    process, its output as text.  The environment is the test's, without
    what changes the CLI's output behind a test's back (COLUMNS,
    CUMEMTRACE_DEBUGINFO) and with NO_COLOR=1; `env` adds to it or
    overrides it.  With `check`, a non-zero exit fails the test with its
    stderr."""
    e = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "CUMEMTRACE_DEBUGINFO")}
    e["NO_COLOR"] = "1"
    e.update(env or {})
    r = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, env=e,
                       cwd=cwd, timeout=timeout)
    if check:
        assert r.returncode == 0, f"cumemtrace {' '.join(map(str, args))} exited " \
                                  f"{r.returncode}:\n{r.stderr}"
    return r
