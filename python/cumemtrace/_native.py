"""Where this installation keeps its native files, and the commands that run
them.  The console scripts exec the native programs, so signals, exit
status and /proc/self/exe are theirs: `cumemtrace run` finds the library in
../lib/ from its own executable, inside this package."""
import os
import re
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def prefix():
    """The package's install prefix (bin/, lib/, share/, include/)."""
    return os.path.join(_HERE, "prefix")


def library():
    """Path of this installation's libcumemtrace.so, or None when the
    package has no native files (a source checkout on PYTHONPATH)."""
    path = os.path.join(prefix(), "lib", "libcumemtrace.so")
    return path if os.path.isfile(path) else None


def source_version():
    """"MAJOR.MINOR.PATCH" from include/cumemtrace.h of the checkout this
    file lies in (the one source of the version), or "unknown" outside one."""
    header = os.path.join(_HERE, "..", "..", "include", "cumemtrace.h")
    try:
        with open(header, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "unknown"
    parts = [re.search(r"^#define CUMEMTRACE_VERSION_%s\s+(\d+)" % k, text, re.M)
             for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else "unknown"


def _exec(*path):
    exe = os.path.join(prefix(), *path)
    name = path[-1]
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"cumemtrace: {exe} is missing: this installation has no native "
                         "files (reinstall with 'pip install --force-reinstall cumemtrace')\n")
        return 2
    try:
        os.execv(exe, [name] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"cumemtrace: cannot run {exe}: {e.strerror}\n")
        return 2


def main():
    """The `cumemtrace` command and `python -m cumemtrace`."""
    return _exec("bin", "cumemtrace")


def simgpu():
    """The `simgpu` command: a command on the simulated GPU (make install
    keeps it in the private lib/cumemtrace/simgpu/, beside its libraries)."""
    return _exec("lib", "cumemtrace", "simgpu", "simgpu")
