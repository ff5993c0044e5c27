#!/bin/sh
# gen_torch_inputs.sh BUILD PYTHON - regenerates tests/golden/inputs/torch/:
# real PyTorch (PYTHON, the venv of scripts/torch-env.sh) on the simulated
# GPU under cumemtrace, in the cases users reported, so that
# the golden reports (tests/golden/report_torch_*, diff_torch_*) show the
# corrected output on real post-mortems.  Review `git diff tests/golden`
# after running it, then CUMEMTRACE_GOLDEN_UPDATE=1 for the expected files.
set -eu
build=${1:?usage: gen_torch_inputs.sh BUILD PYTHON}
python=${2:?usage: gen_torch_inputs.sh BUILD PYTHON}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build" && pwd)
dst="$root/tests/golden/inputs/torch"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dst"

# run NAME MEMORY [ENV...] -- SCRIPT ARGS: the snapshots land in $tmp/NAME
run() {
    name=$1 memory=$2
    shift 2
    mkdir -p "$tmp/$name"
    (cd "$tmp/$name" && env "$@" >/dev/null 2>&1) || true
}
sim() { echo "$root/scripts/simgpu" --build "$build" --memory "$1" --; }
trace() { echo "$build/cumemtrace" run --output ./ --; }
sc="$root/tests/torch/scenarios"

run frag 1GiB $(sim 1GiB) $(trace) "$python" "$sc/pm_fragmentation.py"
run recover 1GiB $(sim 1GiB) $(trace) "$python" "$sc/pm_recover.py"
run exit 24GiB $(sim 24GiB) $(trace) "$python" "$sc/pm_exit.py"
run other 4GiB $(sim 4GiB) $(trace) "$python" "$sc/pm_other.py" 2147483648
run segments 1GiB $(sim 1GiB) $(trace) "$python" "$sc/pm_segments.py"
run expandable 1GiB PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    $(sim 1GiB) $(trace) "$python" "$sc/pm_segments.py"
run history 1GiB CUMEMTRACE_TORCH_HISTORY=1 $(sim 1GiB) $(trace) "$python" "$sc/pm_history.py"
# the demo (make demo): batch 256 on a 24 GiB card with a 700 MiB context
run demo 24GiB "$root/scripts/simgpu" --build "$build" --memory 24GiB --reserved 700MiB -- \
    $(trace) "$python" "$root/examples/train_torch.py" --batch 256

# pick FILE-GLOB-IN-TMP NAME: the one matching file, as NAME.json
pick() {
    set -- $1 "$2"
    [ -f "$1" ] || { echo "gen_torch_inputs: no $1" >&2; exit 1; }
    cp "$1" "$dst/$2.json"
}
pm_with_cause() {
    grep -l "\"cause\":\"$2\"" "$tmp/$1"/*.oom.*.json | head -n 1
}
pick "$(pm_with_cause frag allocator_fragmentation)" fragmentation
pick "$(ls "$tmp"/recover/*.json | grep -v '\.oom\.' | head -n 1)" recovered_exit
pick "$(ls "$tmp"/exit/*.json | head -n 1)" exit_cache
pick "$(pm_with_cause other other_processes)" other_processes
pick "$(pm_with_cause segments allocator_fragmentation)" segments_oom
pick "$(ls "$tmp"/expandable/*.json | grep -v '\.oom\.' | grep pm_segments | head -n 1)" \
    expandable_exit
pick "$(ls "$tmp"/history/*.oom.*.json | head -n 1)" history_oom
pick "$(ls "$tmp"/demo/*.oom.*.json | tail -n 1)" demo_oom
ls -l "$dst"
