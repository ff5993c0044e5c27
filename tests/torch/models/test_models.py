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


def same_figures(r):
    """The tracer's figures equal PyTorch's: everything on the device is its
    caching allocator's segments (the stand-ins allocate nothing)."""
    t = r.torch
    dev = r.device()
    assert dev["peak_bytes"] == t["max_reserved"]
    assert dev["current_bytes"] == t["reserved"]
    assert dev["allocator"]["reserved_bytes"] == t["reserved"]
    return t


def test_cnn_with_batchnorm_cudnn_on_and_off(scenario):
    on = same_figures(scenario("model_cnn.py", "on"))
    off = same_figures(scenario("model_cnn.py", "off"))
    assert on["cudnn"] is True and off["cudnn"] is False
    assert on["cudnn_version"] == 92600  # the stand-in says it is cuDNN 9.26.0
    assert on["max_allocated"] > 0 and off["max_allocated"] > 0


def test_cudnn_batchnorm_workspace_and_reserve_space_are_allocated_by_pytorch(scenario):
    """What the stand-in cuDNN asks for (SIMCUDA_CUDNN_BN_RESERVE,
    SIMCUDA_CUDNN_BN_WORKSPACE) PyTorch allocates from its caching allocator,
    as on a real card: each BatchNorm's reserve space lives from its forward
    to its backward, so the model's two layers hold two of them at the peak;
    the workspace lives during the call."""
    base = same_figures(scenario("model_cnn.py", "on"))
    reserve = same_figures(scenario("model_cnn.py", "on",
                                    env={"SIMCUDA_CUDNN_BN_RESERVE": "4MiB"}))
    assert reserve["max_allocated"] - base["max_allocated"] == 2 * 4 * MiB, (reserve, base)
    ws = same_figures(scenario("model_cnn.py", "on",
                               env={"SIMCUDA_CUDNN_BN_WORKSPACE": "256MiB"}))
    # held with whatever else is live during a BatchNorm call, which is
    # less than at the plain run's peak
    assert ws["max_allocated"] > base["max_allocated"] + 128 * MiB, (ws, base)
    assert ws["max_allocated"] >= 256 * MiB


def test_transformer_encoder_sdpa_under_each_backend(scenario):
    peaks = {}
    for backend in ("default", "flash", "efficient", "cudnn", "math"):
        t = same_figures(scenario("model_transformer.py", backend))
        assert t["backend"] == backend
        peaks[backend] = t["max_allocated"]
    # the math backend materialises the 512 x 512 attention matrix per head;
    # the fused kernels do not
    assert peaks["math"] > peaks["flash"] + 4 * 8 * 512 * 512 * 2, peaks
    # bf16 at compute capability 9.0: PyTorch picks cuDNN attention first
    assert peaks["default"] == peaks["cudnn"], peaks


def test_hugging_face_gpt2_from_a_small_config(scenario):
    t = same_figures(scenario("model_hf.py", "gpt2"))
    assert t["model"] == "gpt2" and t["parameters"] > 2_000_000
    # fp32 parameters, gradients and AdamW's two states: 16 bytes a parameter
    assert t["max_allocated"] > 16 * t["parameters"]


def test_llama_shaped_model_bf16_and_activation_checkpointing(scenario):
    plain = same_figures(scenario("model_hf.py", "llama"))
    ckpt = same_figures(scenario("model_hf.py", "llama", "ckpt"))
    assert plain["model"] == "llama" and ckpt["checkpointing"] is True
    assert plain["parameters"] == ckpt["parameters"]
    # checkpointing keeps fewer activations for backward
    assert ckpt["max_allocated"] < plain["max_allocated"], (ckpt, plain)
