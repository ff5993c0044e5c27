"""make bench's tensor-model rows (scripts/bench_torch_history.py): the
history modes it measures are read from the layer's source
(src/torchboot/layer/history.py), so that the bench measures what the layer
turns on - also when a mode names one of the module's constants
(max_entries=PEAK_ENTRIES) instead of spelling a literal; and its verdict
judges the excess over PyTorch's history as a share of a step without
history, against 1 % of a step; its instruction counts run without the
stream, whose checkpoints come by wall time and fell into one block of the
slope by chance."""
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
