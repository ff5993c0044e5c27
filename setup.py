"""setup.py - the pip package's build: setuptools calling the project's
Makefile (docs/install.md says why this backend).

build_py copies the Python packages (python/cumemtrace, python/
pytest_cumemtrace), then runs `make install PREFIX=<package>/prefix` with
its own build tree, so the native files land inside the installed package
and nowhere else.  Before make runs, scripts/install-deps.sh --build checks
the build dependencies and stops with one line naming the Debian/Ubuntu
packages that are missing.  The version comes from include/cumemtrace.h's
CUMEMTRACE_VERSION_* macros, the one source of it.
"""
import os
import re
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_BASE = os.path.join("build", "pip")  # beside make's own build/ tree, removed by make clean


def header_version():
    """"MAJOR.MINOR.PATCH" from include/cumemtrace.h."""
    path = os.path.join(ROOT, "include", "cumemtrace.h")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    parts = []
    for key in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define CUMEMTRACE_VERSION_%s\s+(\d+)\s*$" % key, text, re.M)
        if m is None:
            sys.exit(f"cumemtrace: setup.py: no '#define CUMEMTRACE_VERSION_{key} N' in {path}")
        parts.append(m.group(1))
    return ".".join(parts)


class BuildNative(build_py):
    """build_py, plus the native files through `make install`."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "cumemtrace")
        with open(os.path.join(pkg, "_version.py"), "w", encoding="utf-8") as f:
            f.write(f'version = "{header_version()}"  # include/cumemtrace.h\n')
        self.make(os.path.abspath(os.path.join(pkg, "prefix")))

    def make(self, prefix):
        if subprocess.run(["sh", os.path.join(ROOT, "scripts", "install-deps.sh"),
                           "--build"]).returncode != 0:
            sys.exit(1)  # install-deps.sh said what is missing, in one line
        temp = os.path.abspath(os.path.join(self.get_finalized_command("build").build_temp,
                                            "make"))
        env = {k: v for k, v in os.environ.items()
               if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # an outer make's jobserver
        jobs = os.environ.get("CUMEMTRACE_JOBS") or str(min(os.cpu_count() or 1, 8))
        cmd = ["make", "-C", ROOT, f"-j{jobs}", f"BUILD={temp}", f"PREFIX={prefix}",
               "DESTDIR=", "SAN=", "install"]
        self.announce("running " + " ".join(cmd), level=2)
        if subprocess.run(cmd, env=env).returncode != 0:
            sys.exit("cumemtrace: make install failed (its output is above)")


class NativeDistribution(Distribution):
    """Native files inside the packages: installed to platlib, and the
    wheel is a platform wheel (what auditwheel repairs)."""

    def has_ext_modules(self):
        return True


class NativeWheel(bdist_wheel):
    """A platform wheel for any Python 3: the native files use no Python
    ABI (the Python side reaches the library through ctypes)."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


os.makedirs(os.path.join(ROOT, BUILD_BASE), exist_ok=True)
setup(
    version=header_version(),
    distclass=NativeDistribution,
    cmdclass={"build_py": BuildNative, "bdist_wheel": NativeWheel},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
