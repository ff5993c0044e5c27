"""Roles (docs/snapshot-format.md, allocator.roles): PyTorch's allocated
bytes split into parameters, buffers, gradients, optimizer state and other
tensors, on a model whose sizes are known exactly - four fp32
nn.Linear(1024, 1024) and a BatchNorm1d trained with AdamW - at the exit
and at an out-of-memory failure, judged against the model's shapes and
against torch.cuda.memory_allocated() at the dump, to the byte."""
import math
import subprocess

from conftest import CLI, MiB

BLOCK = 512  # PyTorch's caching allocator rounds every block to 512 bytes


def blocks(numel, size):
    return math.ceil(numel * size / BLOCK) * BLOCK


def expected(t):
    params = sum(blocks(math.prod(shape), 4) for shape in t["params"])
    buffers = sum(blocks(n, size) for n, size in t["buffers"])
    return params, buffers


def test_roles_at_exit_are_the_models_sizes(scenario):
    r = scenario("roles.py")
    t = r.torch
    params, buffers = expected(t)
    assert params == 4 * (4 * MiB + 4096) + 2 * 4096
    roles = r.device()["allocator"]["roles"]
    assert roles["parameters"] == params
    assert roles["buffers"] == buffers == 4096 + 4096 + 512
    assert roles["gradients"] == params          # every parameter has its .grad
    assert roles["optimizer_state"] == 2 * params  # AdamW: exp_avg and exp_avg_sq
    assert t["state_tensors"] == 2 * len(t["params"])
    assert roles["other"] == 2 * MiB              # the input and the kept activation
    assert roles["optimizers"] == "AdamW"
    assert sum(v for k, v in roles.items() if k != "optimizers") == t["allocated"]
    report = subprocess.run([str(CLI), "report", str(r.files[-1])], capture_output=True,
                            text=True, timeout=60)
    text = " ".join(report.stdout.split())
    assert "roles: 66.1 MiB allocated = parameters 16.0 MiB + buffers 8.50 KiB + " \
        "gradients 16.0 MiB + AdamW state 32.0 MiB + other 2.00 MiB (activations, " \
        "inputs); cache" in text, report.stdout


def test_roles_at_an_oom_sum_to_memory_allocated(scenario):
    r = scenario("roles.py", "oom")
    t = r.torch
    params, buffers = expected(t)
    oom = r.only("oom")["oom"]
    roles = oom["allocator"]["roles"]
    assert (roles["parameters"], roles["buffers"], roles["gradients"],
            roles["optimizer_state"]) == (params, buffers, params, 2 * params)
    assert sum(v for k, v in roles.items() if k != "optimizers") == t["oom"] \
        == oom["allocator"]["allocated_bytes"]
    assert roles["other"] == t["oom"] - 4 * params - buffers > 0
