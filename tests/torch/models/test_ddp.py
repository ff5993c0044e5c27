"""2-rank DistributedDataParallel over the simulated NCCL (src/simgpu/nccl):
torchrun starts two processes, each on its own simulated device, bare and
under the tracer at once.  Each rank's snapshot is judged against that
rank's own memory_stats() to the byte, DDP's reducer buckets must be among
what each rank holds at its peak, and `report DIR` shows both ranks.

SIMCUDA_NCCL_MEMORY gives each communicator device memory through the
stand-in's ncclMemAlloc path (cuMemCreate + cuMemMap, reached through
cudaGetDriverEntryPointByVersion): the tracer must count it as VMM memory,
beside PyTorch's segments, and see it given back at destroy_process_group."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD, CLI, MiB, REAL, SCENARIOS, SIMGPU, TIMEOUT, line_of

pytestmark = pytest.mark.skipif(REAL, reason="the simulated NCCL's figures (SIMCUDA_NCCL_MEMORY)")

NCCL_MEMORY = 64 * MiB
STEPS = 3


def start(tmp, traced, *args):
    out = tmp / ("traced" if traced else "bare")
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_", "RANK",
                                "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "TORCH"))}
    env["SIMCUDA_NCCL_MEMORY"] = f"{NCCL_MEMORY // MiB}MiB"
    cmd = [str(SIMGPU), "--build", str(BUILD), "--memory", "8GiB", "--devices", "2", "--"]
    if traced:
        cmd += [str(CLI), "run", "--output", f"{out}/", "--"]
    # --standalone: a rendezvous on a free port, so both runs can go at once
    cmd += [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "2", str(SCENARIOS / "model_ddp.py"), *args]
    p = subprocess.Popen(cmd, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    return p, out


def finish(started):
    p, out = started
    try:
        stdout, stderr = p.communicate(timeout=2 * TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        stdout, stderr = p.communicate()
        raise AssertionError(f"timed out:\n{stderr}")
    assert p.returncode == 0, stderr
    lines = [l for l in stdout.splitlines() if l.startswith("TORCH ")]
    assert len(lines) == 1, (stdout, stderr)
    return json.loads(lines[0][6:])["ranks"], out, stderr


def frames_of(snapshot, stack_id):
    for s in snapshot["stacks"]:
        if s["id"] == stack_id:
            return s["frames"]
    raise AssertionError(f"no stack {stack_id}")


@pytest.mark.parametrize("mode", ["unused", "static"])
def test_two_rank_ddp_each_rank_to_the_byte(tmp_path, mode):
    started = [start(tmp_path, traced, str(STEPS), mode) for traced in (False, True)]
    (bare, bare_out, _), (ranks, out, stderr) = [finish(s) for s in started]
    assert ranks == bare, "the tracer changed what PyTorch saw"
    assert list(bare_out.glob("cumemtrace.*.json")) == [], "the bare run wrote snapshots"
    assert [r["rank"] for r in ranks] == [0, 1]
    ddp_line = line_of("model_ddp.py", "DDP")
    for t in ranks:
        rank = t["rank"]
        assert t["world_size"] == 2 and t["steps"] == STEPS
        assert t["find_unused"] is (mode == "unused")
        assert t["nccl_version"] == [2, 30, 7]  # the stand-in says it is the wheel's NCCL
        assert t["device"] == rank  # LOCAL_RANK picked its own simulated device
        # bucket_cap_mb=0.25 splits the 2 MiB (and more) of parameters into buckets
        assert len(t["buckets"]) >= 2, t["buckets"]
        # per-rank file names, from torchrun's RANK
        files = sorted(out.glob(f"cumemtrace.model_ddp.*.{rank}.json"))
        assert len(files) == 1, (list(out.iterdir()), stderr)
        snap = json.loads(files[0].read_text())
        assert snap["reason"] == "exit"
        assert snap["process"]["rank"] == rank and snap["process"]["world_size"] == 2
        assert [d["ordinal"] for d in snap["devices"]] == [rank]
        dev = snap["devices"][0]
        kinds = dev["by_kind"]
        # PyTorch's segments are the device kind, to the byte
        assert kinds["device"]["peak_bytes"] == t["max_reserved"] == t["stats_peak_reserved"]
        assert kinds["device"]["current_bytes"] == t["reserved"]
        assert kinds["device"]["allocs"] == t["segments_allocated"]
        alloc = dev["allocator"]
        assert alloc["peak_allocated_bytes"] == t["max_allocated"] == t["stats_peak_allocated"]
        assert alloc["reserved_bytes"] == t["reserved"]
        # the communicator's memory: VMM, taken at init, given back at destroy
        assert kinds["vmm"]["peak_bytes"] == NCCL_MEMORY
        assert kinds["vmm"]["current_bytes"] == 0
        assert (kinds["vmm"]["allocs"], kinds["vmm"]["frees"]) == (1, 1)
        assert dev["peak_bytes"] == t["max_reserved"] + NCCL_MEMORY
        assert dev["current_bytes"] == t["reserved"]
        # the reducer's buckets: PyTorch's tensors live at exit include them,
        # made by the line that wraps the model in DDP or, when DDP rebuilt
        # them, by the forward that did
        lines = {line_of("model_ddp.py", "DDP"), line_of("model_ddp.py", "FORWARD")}
        held = sum(e["bytes"] for e in alloc["top_tensors"]
                   if [f["line"] for f in e["stack"]] and e["stack"][-1]["line"] in lines
                   and e["stack"][-1]["file"].endswith("model_ddp.py"))
        assert held >= sum(t["buckets"]), (held, t["buckets"], alloc["top_tensors"])
    # the multi-rank view reads both
    rep = subprocess.run([str(CLI), "report", str(out)], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert rep.returncode == 0, rep.stderr
    assert "2 ranks (world size 2), 2 files" in rep.stdout, rep.stdout
    for rank in (0, 1):
        assert re.search(rf"^\s+{rank}\s+\S+:{rank}\s+\S+ MiB", rep.stdout, re.M), rep.stdout
