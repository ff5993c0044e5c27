"""Real models on the simulated GPU (make test-models): PyTorch's own layers
on the stand-in cuBLAS, cuBLASLt (src/simgpu), under the tracer.  Each
scenario runs bare and traced (the conftest's `scenario` fixture: same
output, same exit status) and the tracer's figures are judged against
PyTorch's memory_stats() to the byte."""
from conftest import MiB


def test_mlp_with_adamw_trains(scenario):
    r = scenario("model_mlp.py")
    t = r.torch
    assert t["max_allocated"] == t["stats_peak_allocated"]
    assert t["max_reserved"] == t["stats_peak_reserved"]
    dev = r.device()
    # Everything on the device is PyTorch's: its segments are the driver's
    # allocations, so the tracer's peak is PyTorch's reserved peak.
    assert dev["peak_bytes"] == t["max_reserved"]
    assert dev["current_bytes"] == t["reserved"]
    assert dev["by_kind"]["device"]["allocs"] == t["segments_allocated"]
    # PyTorch's figures reach the snapshot through its layer at exit.
    assert dev["allocator"]["allocated_bytes"] == t["allocated"]
    assert dev["allocator"]["reserved_bytes"] == t["reserved"]
    # Parameters (4.2 M floats), AdamW's two states and the gradients: 4 x 16 MiB,
    # plus the 32 MiB cuBLAS workspace of a backward matmul.
    assert t["max_allocated"] >= 4 * 16 * MiB + 32 * MiB
