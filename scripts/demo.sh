#!/bin/sh
# demo.sh BUILD PYTHON - what `make demo` runs: real PyTorch
# (examples/train_torch.py) on a simulated 24 GiB GPU under cumemtrace, at a
# batch that fits and at one that ends in torch.OutOfMemoryError, then the
# post-mortem of that OOM and what grew between the two runs.
set -eu
build=${1:-build}
python=${2:?usage: demo.sh BUILD PYTHON}
here=$(cd "$(dirname "$0")" && pwd)
out="$build/demo"
rm -rf "$out"
mkdir -p "$out/fits" "$out/oom"
# 24 GiB, of which 700 MiB is "the CUDA context": memory no allocation of
# this process accounts for.
sim() { "$here/simgpu" --build "$build" --memory 24GiB --reserved 700MiB -- "$@"; }

echo "== 1. batch 32 under cumemtrace (fits)"
sim "$build/cumemtrace" run --output "$out/fits/" -- "$python" examples/train_torch.py --batch 32
echo
echo "== 2. batch 256 (does not fit: PyTorch raises torch.OutOfMemoryError)"
# PyTorch's traceback is folded to its last line (the error); everything
# else - cumemtrace's lines and the list of files written - is kept.
sim "$build/cumemtrace" run --output "$out/oom/" -- "$python" examples/train_torch.py --batch 256 \
    2>&1 | awk '/^Traceback / { tb = 1; next } tb && /^ / { next } { tb = 0; print }' || true
echo
postmortem=$(ls "$out"/oom/*.oom.*.json | tail -n 1)
echo "== 3. cumemtrace report $postmortem"
"$build/cumemtrace" report "$postmortem"
echo
echo "== 4. cumemtrace diff (batch 32 exit) (batch 256 post-mortem)"
"$build/cumemtrace" diff "$(ls "$out"/fits/*.json | head -n 1)" "$postmortem" || true
