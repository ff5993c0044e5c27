"""Matmuls run on the simulated GPU's stand-in cuBLAS (src/simgpu/blas), and
PyTorch's cuBLAS workspace is what it allocates on the imitated card."""
import pytest

from conftest import REAL

MiB = 1 << 20


def test_matmul_runs_with_pytorchs_workspace(scenario):
    r = scenario("matmul.py")
    t = r.torch
    assert t["error"] is None, t["error"]
    # PyTorch's size for compute capability 9.0 and later: 32 MiB
    # (aten/src/ATen/cuda/CublasHandlePool.cpp, _getWorkspaceSize).
    if not REAL:
        assert t["capability"] == [9, 0]
    if t["capability"][0] >= 9:
        assert t["workspace"] == 32 * MiB
    # What PyTorch holds is all the device holds: the stand-ins allocate nothing.
    assert r.device()["current_bytes"] == t["reserved"]


@pytest.mark.skipif(REAL, reason="the real card's workspace is checked above")
def test_cublas_workspace_config_is_honoured(scenario):
    # ":SIZE_KiB:COUNT" - 4096 KiB x 2 buffers
    r = scenario("matmul.py", env={"CUBLAS_WORKSPACE_CONFIG": ":4096:2"})
    assert r.torch["error"] is None
    assert r.torch["workspace"] == 8 * MiB


@pytest.mark.skipif(REAL, reason="the real card has its own compute capability")
def test_cublas_workspace_follows_the_imitated_cards_compute_capability(scenario):
    # an L4 (compute capability 8.9): PyTorch's size below 9.0 is
    # 4096 KiB x 2 + 16 KiB x 8
    r = scenario("matmul.py", env={"SIMCUDA_CC": "8.9", "SIMCUDA_SMS": "58"})
    assert r.torch["capability"] == [8, 9]
    assert r.torch["workspace"] == 8 * MiB + 128 * 1024
