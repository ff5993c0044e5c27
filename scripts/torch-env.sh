#!/bin/sh
# torch-env.sh - makes sure a virtual environment with PyTorch's CUDA wheel
# (and pytest, numpy - without it every torch import warns "Failed to
# initialize NumPy" - and Hugging Face transformers for the model tests)
# exists, and prints its python on stdout.  `make test-torch`, `make
# test-models` and `make demo` call it; it never runs at import time.
#
#   scripts/torch-env.sh [--check]
#
# Location: $CUMEMTRACE_TORCH_VENV, default ~/.cache/cumemtrace/torch-venv
# (outside the tree, so CI may cache it and `make clean` keeps it).  A venv
# there whose python imports torch, pytest, numpy and transformers is reused
# as is; otherwise it is created with $PYTHON (default /usr/bin/python3) and
# filled with `pip install torch pytest numpy transformers` from PyPI -
# several GB (the nvidia-* wheels), once; a venv that has torch gets only what
# it lacks.  Set CUMEMTRACE_TORCH_SPEC to pin another requirement (e.g.
# "torch==2.15.0").  --check: say whether the venv is usable, install
# nothing (exit 1 if not).  Progress goes to stderr, the log of an install
# to $venv.pip.log.
set -eu

venv=${CUMEMTRACE_TORCH_VENV:-${HOME:-/root}/.cache/cumemtrace/torch-venv}
python=${PYTHON:-/usr/bin/python3}
spec=${CUMEMTRACE_TORCH_SPEC:-torch}

usable() {
    [ -x "$venv/bin/python" ] &&
        "$venv/bin/python" -c 'import torch, pytest, numpy, transformers' >/dev/null 2>&1
}

if usable; then
    echo "$venv/bin/python"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "torch-env: no usable PyTorch venv at $venv (run scripts/torch-env.sh to create it)" >&2
    exit 1
fi

command -v "$python" >/dev/null 2>&1 || {
    echo "torch-env: $python not found: set PYTHON to a Python 3.9+ interpreter" >&2
    exit 1
}
mkdir -p "$(dirname "$venv")"
log="$venv.pip.log"
if [ -x "$venv/bin/python" ]; then
    echo "torch-env: completing $venv with '$spec' pytest numpy transformers (log: $log)" >&2
else
    echo "torch-env: creating $venv with $python and installing '$spec' pytest numpy transformers (several GB, once; log: $log)" >&2
fi
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >"$log" 2>&1 || {
        echo "torch-env: '$python -m venv $venv' failed (on Debian: apt-get install python3-venv); see $log" >&2
        exit 1
    }
fi
"$venv/bin/python" -m pip install --upgrade pip >>"$log" 2>&1 || true
"$venv/bin/python" -m pip install $spec pytest numpy transformers >>"$log" 2>&1 || {
    echo "torch-env: 'pip install $spec pytest numpy transformers' failed; see the end of $log" >&2
    tail -n 5 "$log" >&2
    exit 1
}
usable || {
    echo "torch-env: $venv/bin/python cannot import torch after the install; see $log" >&2
    exit 1
}
echo "$venv/bin/python"
