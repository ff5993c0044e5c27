"""What cannot run on the simulated GPU fails cleanly (README: limits)."""
import pytest

from conftest import REAL


@pytest.mark.skipif(REAL, reason="a real GPU runs cuBLAS: nothing to check")
def test_matmul_fails_with_pytorchs_error(scenario):
    r = scenario("matmul.py")
    err = r.torch["error"]
    assert err is not None and "CUBLAS_STATUS_NOT_INITIALIZED" in err, err
    # What PyTorch allocated before cuBLAS refused (its workspace) is seen.
    assert r.device()["current_bytes"] == r.torch["reserved"]
