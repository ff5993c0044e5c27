"""make bench's tensor-model rows (scripts/bench_torch_history.py): the
history modes it measures are read from the layer's source
(src/torchboot/layer/history.py), so that the bench measures what the layer
turns on - also when a mode names one of the module's constants
(max_entries=PEAK_ENTRIES) instead of spelling a literal; and its verdict
judges the excess over PyTorch's history as a share of a step without
history, against 1 % of a step; its instruction counts run without the
stream, whose checkpoints come by wall time and fell into one block of the
slope by chance; its CPU rows time long blocks, a process a mode, and judge
the round-by-round excess by its quartiles."""
import argparse
import ast
import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_torch_history as bench  # noqa: E402

RUNS_NO_C = True  # reads the bench script and the layer's source


def _layer_constants():
    """history.py's module-level literals and modes, as Python evaluates
    them (the file imports only os, sys and threading)."""
    src = open(os.path.join(ROOT, "src", "torchboot", "layer", "history.py")).read()
    ns = {}
    exec(compile(ast.parse(src), "history.py", "exec"), ns)
    return ns


def test_the_modes_are_the_layers_own():
    ns = _layer_constants()
    assert bench.layer_mode("HISTORY_MODE") == ns["HISTORY_MODE"]
    assert bench.layer_mode("PEAK_MODE") == ns["PEAK_MODE"]


def test_the_verdict_is_against_one_percent_of_a_step():
    # an excess of 0.9 % of a step with a CPU spread under the line: met;
    # 1.1 %: missed; a CPU spread across the line: not measurable
    assert bench.verdict(0.009, 0.002, 0.008, bench.BUDGET) == "met"
    assert bench.verdict(0.011, 0.002, 0.008, bench.BUDGET) == "MISSED"
    assert bench.verdict(0.009, 0.002, 0.03, bench.BUDGET) == "not measurable"


def test_the_counts_run_without_the_streams_checkpoints():
    # a checkpoint (with the first symbol-table read) landed in the N-step
    # block of the CUMEMTRACE_TORCH_PEAK=0 run and took its cost off the
    # slope: that row then counted fewer instructions than PyTorch's history
    # alone
    for where, extra, _ in bench.SIDES:
        env = bench.counting_env(extra)
        assert env["CUMEMTRACE_STREAM"] == "off", (where, env)
        assert all(env[k] == v for k, v in extra.items()), (where, env)


def test_the_cpu_blocks_are_long_and_one_mode_a_process():
    # the CPU rows timed one block of the slope's N steps (5 in the partial
    # runs: some 3 ms of an MLP) per mode, the first after start-up in
    # cumemtrace's process, and showed +30 % that 200-step blocks run in
    # lockstep did not; a block is now --cpu-steps, after a warm-up as long
    args = argparse.Namespace(steps=5, cpu_steps=100, model="mlp", build="/b")
    argv = bench.command(args, "py", "bare", ["state_python"], False, "loop.py", "cg.so")
    mine = argv[argv.index("loop.py") + 1:]
    assert mine[1:4] == ["state_python", "100", "100"], mine
    # the slope keeps its N
    argv = bench.command(args, "py", "bare", ["off", "state_python"], True, "loop.py",
                         "cg.so", "/tmp/cg")
    mine = argv[argv.index("loop.py") + 1:]
    assert mine[1:3] == ["off,state_python", "5"], mine


def test_the_cpu_spread_is_the_rounds_quartiles():
    # rounds of 0-4 % over the reference, one beside another program's
    # burst at +60 %: the quartiles stay near the rounds, the extremes
    # still show the burst
    floor = [1.0] * 9
    ref = [1.0] * 9
    side = [1.00, 1.01, 1.02, 1.02, 1.03, 1.03, 1.04, 1.04, 1.60]
    lo, mid, hi, least, most = bench.paired(side, ref, floor)
    assert abs(mid - 0.03) < 1e-9 and abs(lo - 0.02) < 1e-9 and abs(hi - 0.04) < 1e-9
    assert least == 0.0 and abs(most - 0.60) < 1e-9
    # each round against its own reference and floor
    lo, mid, hi, _, _ = bench.paired([2.2, 1.1], [2.0, 1.0], [2.0, 1.0])
    assert abs(mid - 0.1) < 1e-9
