#!/bin/sh
# demo-c.sh BUILD - what `make demo-c` runs: the demo for a program without
# PyTorch (examples/train_sim.c, a C training loop with a caching allocator of
# its own) on a simulated 24 GiB GPU, once at a batch size that fits and once
# at one that does not, then the post-mortem of the failure and what grew
# between the two runs.
set -eu
build=${1:-build}
out="$build/demo-c"
rm -rf "$out"
mkdir -p "$out/fits" "$out/oom"

# The simulated card: 24 GiB, of which 700 MiB is taken by "the CUDA
# context" - memory no allocation of this process accounts for.
export LD_LIBRARY_PATH="$build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMCUDA_MEMORY=24GiB SIMCUDA_RESERVED=700MiB

echo "== 1. batch 16 under cumemtrace (fits)"
"$build/cumemtrace" run --output "$out/fits/" -- "$build/examples/train_sim" --batch 16
echo
echo "== 2. batch 64 (does not fit)"
"$build/cumemtrace" run --output "$out/oom/" -- "$build/examples/train_sim" --batch 64 || true
echo
postmortem=$(ls "$out"/oom/*.oom.*.json | head -n 1)
echo "== 3. cumemtrace report $postmortem"
"$build/cumemtrace" report "$postmortem"
echo
echo "== 4. cumemtrace diff (batch 16 exit) (batch 64 post-mortem)"
"$build/cumemtrace" diff "$(ls "$out"/fits/*.json | head -n 1)" "$postmortem" || true
echo
echo "== 5. cumemtrace html (the post-mortem as one page)"
"$build/cumemtrace" html "$postmortem" -o "$out/report.html"
echo "open $out/report.html in a browser (self-contained: no network needed)"
