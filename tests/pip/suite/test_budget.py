"""A small suite for `pytest --cumemtrace` from an installed cumemtrace
(tests/pip/test_pip.py): one test within its budget, one over it."""
import pytest
import torch

MiB = 1 << 20


@pytest.mark.limit_gpu_memory("64 MiB")
def test_within_budget():
    x = torch.empty(16 * MiB, dtype=torch.uint8, device="cuda")
    del x


@pytest.mark.limit_gpu_memory("64 MiB")
def test_over_budget():
    x = torch.empty(100 * MiB, dtype=torch.uint8, device="cuda")  # @over
    del x
