"""`cumemtrace fit --nproc N`: a job of N ranks started by torchrun on N
simulated cards (src/cli/views/fit_ranks.c).  Each rank's row must be that
rank's own memory_stats() peaks, printed by the script itself; the job's
verdict is the cards' (fits on N x CARD, or does not)."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import CLI, MiB, REAL, SCENARIOS, TIMEOUT

pytestmark = pytest.mark.skipif(REAL, reason="several simulated cards")


def env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_", "RANK",
                                 "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "TORCH"))}


def fit(tmp_path, card, script, *args, extra=()):
    opt = ["--memory", card] if card[0].isdigit() else ["--gpu", card]
    p = subprocess.run([str(CLI), "fit", "--bytes", "--no-fixes", "--output", str(tmp_path),
                        *opt, "--nproc", "2", *extra, "--", sys.executable,
                        str(SCENARIOS / script), *args], env=env(), capture_output=True,
                       text=True, timeout=4 * TIMEOUT)
    ranks = {int(m.group(1)): (int(m.group(2)), int(m.group(3))) for m in re.finditer(
        r"^ +rank (\d+) +max allocated (\d+) +max reserved (\d+)$", p.stdout, re.M)}
    return p, ranks


# One FSDP2 job on 2 x a100-40gb with NCCL's buffers counted, judged by the
# two tests below (the buffers are outside PyTorch's allocator: its figures
# are the same with them; test_ddp_... runs without them)
_fsdp2 = {}


def fsdp2_with_nccl_channels(tmp_path_factory):
    if not _fsdp2:
        tmp = tmp_path_factory.mktemp("fsdp2")
        _fsdp2["run"] = (tmp, *fit(tmp, "a100-40gb", "model_fsdp2.py", "2", "4",
                                   extra=("--nccl-channels", "2")))
    return _fsdp2["run"]


def test_fsdp2_gpt2_each_ranks_figures_are_its_own_memory_stats(tmp_path_factory):
    tmp_path, p, ranks = fsdp2_with_nccl_channels(tmp_path_factory)
    assert p.returncode == 0, p.stdout + p.stderr
    log = open(tmp_path / "a100-40gb" / "output.log").read()
    own = {}
    for l in log.splitlines():
        if l.startswith("RANK_FIGURES "):
            t = json.loads(l[len("RANK_FIGURES "):])
            own[t["rank"]] = (t["max_allocated"], t["max_reserved"])
    assert sorted(own) == [0, 1], log[-3000:]
    assert ranks == own, (p.stdout, own)
    row = p.stdout.splitlines()[1].split()
    assert row[0] == "a100-40gb" and row[2] == "fits", p.stdout
    assert int(row[3]) == max(a for a, _ in own.values()), p.stdout
    assert "the job fits on 2 x a100-40gb" in p.stdout.splitlines(), p.stdout


def test_ddp_each_ranks_figures_are_its_own_memory_stats(tmp_path):
    p, ranks = fit(tmp_path, "l4", "model_ddp.py", "3", "unused")
    assert p.returncode == 0, p.stdout + p.stderr
    log = open(tmp_path / "l4" / "output.log").read()
    line = [l for l in log.splitlines() if l.startswith("TORCH ")]
    assert line, log[-3000:]
    own = {t["rank"]: (t["stats_peak_allocated"], t["stats_peak_reserved"])
           for t in json.loads(line[-1][6:])["ranks"]}
    assert ranks == own, (p.stdout, own)
    assert "the job fits on 2 x l4" in p.stdout.splitlines(), p.stdout


def test_a_job_that_does_not_fit_names_the_rank_and_its_line(tmp_path):
    # batch 512 x 256 tokens of an 8000-word vocabulary: the logits alone
    # (4 GiB in fp32) do not fit a 1 GiB card
    p, _ = fit(tmp_path, "1GiB", "model_fsdp2.py", "1", "512")
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"^1GiB +\d+ +OOM ", p.stdout, re.M), p.stdout
    assert re.search(r"OOM at rank [01]: \S*model_fsdp2\.py:\d+ ", p.stdout), p.stdout
    assert "the job does not fit on 2 x 1GiB" in p.stdout.splitlines(), p.stdout


def test_nproc_needs_a_python_script():
    p = subprocess.run([str(CLI), "fit", "--gpu", "l4", "--nproc", "2", "--", "/bin/true"],
                       env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 2 and "--nproc" in p.stderr and len(p.stderr.splitlines()) <= 2, \
        p.stderr
    p = subprocess.run([str(CLI), "fit", "--gpu", "l4", "--nproc", "0", "--", "python", "x.py"],
                       env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 2 and "--nproc '0'" in p.stderr, p.stderr


def test_nccl_channels_counts_ncclS_default_buffers_in_each_ranks_device_memory(
        tmp_path_factory):
    # 2 channels of a ring: each receives Simple 4 MiB + LL 512 KiB + LL128
    # 4.6875 MiB (NCCL's default sizes), taken through ncclMemAlloc's path
    # (2 MiB granularity) when the communicator is created
    _, p, ranks = fsdp2_with_nccl_channels(tmp_path_factory)
    assert p.returncode == 0, p.stdout + p.stderr
    nccl = 2 * (4 * MiB + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8)
    row = p.stdout.splitlines()[1].split()
    reserved = int(row[4])
    m = re.search(r"the process held (\d+) of device memory at its peak", p.stdout)
    assert m, p.stdout
    held = int(m.group(1))
    assert held - reserved >= -(-nccl // (2 * MiB)) * 2 * MiB, (held, reserved, nccl)
    assert int(row[5]) == int(row[1]) - 500 * MiB - held, p.stdout  # the headroom counts it
    assert "NCCL's own buffers: 18.4 MiB a communicator (--nccl-channels 2" in p.stdout
    assert sorted(ranks) == [0, 1]
    q = subprocess.run([str(CLI), "fit", "--gpu", "l4", "--nccl-channels", "2", "--", "python",
                        "x.py"], env=env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert q.returncode == 2 and "--nccl-channels needs --nproc" in q.stderr, q.stderr


def test_a_rank_fit_did_not_start_still_reports_to_fit(tmp_path):
    # a scheduler's RANK in the caller's environment (no --nproc): the one
    # process's figures are still the card's
    e = env()
    e["RANK"] = "3"
    p = subprocess.run([str(CLI), "fit", "--bytes", "--no-fixes", "--output", str(tmp_path),
                        "--gpu", "l4", "--", sys.executable, str(SCENARIOS / "model_mlp.py"),
                        "1", "64"], env=e, capture_output=True, text=True, timeout=2 * TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    row = p.stdout.splitlines()[1].split()
    assert row[2] == "fits" and int(row[3]) > 0, p.stdout
