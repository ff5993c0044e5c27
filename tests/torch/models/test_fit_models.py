"""`cumemtrace fit` on a real PyTorch training script: its figures are
PyTorch's own (the same script run bare on the same simulated card prints
them from memory_stats()), and its verdict is what the caching allocator
did (an OutOfMemoryError in the bare run, or none)."""
import os
import re
import subprocess
import sys

from conftest import BUILD, CLI, SCENARIOS, SIMGPU, TIMEOUT, line_of
import json


def env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_"))}


def bare(card, *args):
    opt = ["--gpu", card] if not card[0].isdigit() else ["--gpu", "h100", "--memory", card]
    p = subprocess.run([str(SIMGPU), "--build", str(BUILD), *opt, "--", sys.executable,
                        str(SCENARIOS / "model_mlp.py"), *args], env=env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    line = [l for l in p.stdout.splitlines() if l.startswith("TORCH ")]
    return p, json.loads(line[-1][6:]) if line else None


def fit(tmp_path, cards, *args):
    opts = []
    for c in cards:
        opts += ["--memory", c] if c[0].isdigit() else ["--gpu", c]
    p = subprocess.run([str(CLI), "fit", "--bytes", "--output", str(tmp_path), *opts, "--",
                        sys.executable, str(SCENARIOS / "model_mlp.py"), *args], env=env(),
                       capture_output=True, text=True, timeout=3 * TIMEOUT)
    table = {l.split()[0]: l for l in p.stdout.splitlines()[1:]}
    return p, table


def test_fit_figures_are_pytorchs_and_the_verdicts_the_allocators(tmp_path):
    # batch 32768: two 512 MiB hidden activations kept for backward; a 2 GiB
    # card less its 500 MiB context reserve cannot hold them
    p, table = fit(tmp_path, ["l4", "2GiB"], "2", "32768")
    assert p.returncode == 1, p.stderr  # it ran out of memory on one card
    ok, t = bare("l4", "2", "32768")
    assert ok.returncode == 0 and t is not None, ok.stderr
    f = table["l4"].split()
    assert f[2] == "fits", table["l4"]
    assert [int(f[3]), int(f[4])] == [t["max_allocated"], t["max_reserved"]]
    assert int(f[5]) == 23034 * (1 << 20) - 500 * (1 << 20) - t["max_reserved"]

    small, _ = bare("2GiB", "2", "32768")
    assert small.returncode != 0 and "torch.OutOfMemoryError" in small.stderr, small.stderr
    row = table["2GiB"]
    m = re.search(r"OOM at (\S+):(\d+) \(<module>\) after \d+\.\d s", row)
    assert m, row
    assert m.group(1).endswith("model_mlp.py")
    # the line of the script that raised it: the forward, the backward or the step
    assert int(m.group(2)) in range(line_of("model_mlp.py", "FORWARD"),
                                    line_of("model_mlp.py", "FORWARD") + 4), row
    assert os.path.exists(row.split()[-1]), row  # the post-mortem
