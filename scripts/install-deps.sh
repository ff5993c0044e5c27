#!/bin/sh
# install-deps.sh - checks for what cumemtrace needs to build and test, and
# installs the missing Debian/Ubuntu packages when it can (root or sudo).
#
#   scripts/install-deps.sh                   install what is missing
#   scripts/install-deps.sh --check-or-install   same (what `make` calls)
#   scripts/install-deps.sh --check           only report; exit 1 if missing
#   scripts/install-deps.sh --ci              also every tool a test needs (chromium, go,
#                                             jsonschema, faketime, clang for fuzzing...):
#                                             under CI=true a missing one fails its tests
#                                             (tests/needs.py); the PyTorch venv, and
#                                             the NVTX header in it, come from
#                                             scripts/torch-env.sh
#   scripts/install-deps.sh --torch           also what the PyTorch venv needs (make demo)
#   scripts/install-deps.sh --bench           also what `make bench` compares with (heaptrack, memray)
#   scripts/install-deps.sh --build           only what building needs (pip install calls
#                                             it): one line naming what is missing, exit 1;
#                                             never installs anything
set -eu

mode=install
ci=0
bench=0
torch=0
for arg in "$@"; do
    case "$arg" in
        --check) mode=check ;;
        --check-or-install) mode=install ;;
        --ci) ci=1 ;;
        --bench) bench=1 ;;
        --torch) torch=1 ;;
        --build) mode=build ;;
        *) echo "install-deps.sh: unknown option '$arg' (use --check, --build, --ci, --torch or --bench)" >&2; exit 2 ;;
    esac
done

missing=""
need() { # need PACKAGE TEST...
    pkg=$1; shift
    if ! "$@" >/dev/null 2>&1; then
        missing="$missing $pkg"
    fi
}
have_header() { printf '#include <%s>\n' "$1" | cc -E -x c - >/dev/null 2>&1; }
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
py=/usr/bin/python3

# Building the library, the CLI and the simulated device (what setup.py runs
# make for).  libunwind is not among them: only make bench's floor uses it.
if [ "$mode" = build ]; then
    need make        command -v make
    need gcc         command -v "${CC:-cc}"
    need g++         command -v c++     # libstdc++ for the CLI's demangling
    need uthash-dev  have_header uthash.h
    need libdw-dev   have_header elfutils/libdwfl.h
    need libprotobuf-c-dev have_header protobuf-c/protobuf-c.h
    need protobuf-c-compiler command -v protoc-c
    need zlib1g-dev  have_header zlib.h
    [ -z "$missing" ] && exit 0
    echo "cumemtrace: cannot build: missing Debian/Ubuntu packages:$missing (install them with: sudo apt-get install$missing)" >&2
    exit 1
fi

need make        command -v make
need gcc         command -v cc
need g++         command -v c++
need binutils    command -v nm
need uthash-dev  have_header uthash.h
need libcmocka-dev have_header cmocka.h
need libunwind-dev have_lib libunwind.so.8
need libdw-dev   have_header elfutils/libdwfl.h
need python3-pytest "$py" -c "import pytest"
need libprotobuf-c-dev have_header protobuf-c/protobuf-c.h   # export --format pprof
need protobuf-c-compiler command -v protoc-c
need zlib1g-dev  have_header zlib.h
need valgrind    command -v valgrind
if [ "$ci" = 1 ]; then
    need chromium    command -v chromium   # tests/e2e/test_html.py
    need python3-jsonschema "$py" -c "import jsonschema"   # tests/e2e/test_export.py
    need golang-go   command -v go   # go tool pprof reads our export: tests/e2e/test_pprof_tool.py
    need clang command -v clang
    need faketime test -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1   # tests/e2e/test_start_up.py
    # a shared libpython for an application that dlopens it after us: tests/e2e/test_python.py
    need libpython3-dev "$py" -c 'import os, sys, sysconfig as s; sys.exit(not os.path.exists(os.path.join(s.get_config_var("LIBDIR"), s.get_config_var("INSTSONAME"))))'
    need libclang-rt-14-dev sh -c 'test -n "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null | grep /)" && test -f "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a)"'
fi

if [ "$ci" = 1 ] || [ "$torch" = 1 ]; then
    # scripts/torch-env.sh makes the PyTorch venv: make demo, make test-torch
    need python3-venv "$py" -c "import venv, ensurepip"
fi

if [ "$bench" = 1 ]; then
    need heaptrack   command -v heaptrack   # scripts/bench.py: the peer it is compared with
    # memray (PyPI), beside PyTorch in its venv: the Python peer, in its
    # Python-only and native modes (scripts/bench_python.py --memray)
    venv_py=${CUMEMTRACE_TORCH_VENV:-${HOME:-/root}/.cache/cumemtrace/torch-venv}/bin/python
    if [ -x "$venv_py" ] && ! "$venv_py" -c "import memray" >/dev/null 2>&1; then
        echo "cumemtrace: installing memray into the PyTorch venv ($venv_py), for make bench" >&2
        "$venv_py" -m pip install -q memray >&2 ||
            echo "cumemtrace: 'pip install memray' failed; make bench skips its rows" >&2
    fi
fi

[ -z "$missing" ] && exit 0

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$mode" = check ]; then
    echo "cumemtrace: missing packages:$missing. Install them with: sudo $cmd" >&2
    exit 1
fi
if [ "$(id -u)" = 0 ]; then
    echo "cumemtrace: installing:$missing" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive $cmd
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo "cumemtrace: installing with sudo:$missing" >&2
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive $cmd
else
    echo "cumemtrace: missing packages:$missing." >&2
    echo "cumemtrace: install them with: sudo $cmd   (then run make again)" >&2
    exit 1
fi
