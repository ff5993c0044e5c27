"""Real PyTorch's allocator on the simulated GPU, judged to the byte
against PyTorch's own memory_stats() (see conftest.py)."""
from conftest import REAL, MiB, line_of, markers, python_frames


def test_default_caching_allocator(scenario):
    r = scenario("default_alloc.py")
    t = r.torch
    snap = r.only("exit")
    dev = r.device()
    # Device memory is what PyTorch reserved: its segments are our cudaMallocs.
    assert dev["peak_bytes"] == t["max_reserved"]
    assert t["peak_reserved"] < t["max_reserved"]  # the last tensor made the peak
    assert dev["current_bytes"] == t["reserved"]
    kind = dev["by_kind"]["device"]
    assert kind["allocs"] == t["segments_allocated"]
    assert kind["frees"] == t["segments_freed"]
    assert t["segments_freed"] > 0  # empty_cache released cached segments
    # Every segment comes from a torch.empty of the script, through
    # libtorch's empty_cuda, and carries the script's line.  (PyTorch's
    # bindings release the GIL around the op: frames come from python.c's
    # GIL-free reader.)
    want = {line_of("default_alloc.py", "ALLOC"), line_of("default_alloc.py", "AFTER")}
    seen = set()
    for group in dev["live"]:
        stack = next(s for s in snap["stacks"] if s["id"] == group["stack"])
        symbols = [f.get("symbol") or "" for f in stack["frames"]]
        assert any("empty_cuda" in sym for sym in symbols), symbols
        lines = {f["line"] for f in python_frames(snap, group["stack"])
                 if f["file"].endswith("default_alloc.py")}
        assert len(lines) == 1, (lines, stack)
        seen |= lines
    assert seen == want, (seen, want)

def frames_of(snap, stack_id):
    return next(s for s in snap["stacks"] if s["id"] == stack_id)["frames"]


def test_training_loop_adam_foreach(scenario):
    r = scenario("train_adam.py")
    t = r.torch
    snap = r.only("exit")
    dev = r.device()
    assert dev["peak_bytes"] == t["max_reserved"]
    assert dev["current_bytes"] == t["reserved"]
    assert dev["by_kind"]["device"]["allocs"] == t["segments_allocated"]
    assert sum(g["bytes"] for g in dev["at_peak"]) == dev["peak_bytes"]
    # At the peak: segments allocated by the forward line (activations kept
    # for backward: 3 layers x 16 MiB each at least) ...
    forward = line_of("train_adam.py", "FORWARD")
    fwd = sum(g["bytes"] for g in dev["at_peak"]
              if any(f["file"].endswith("train_adam.py") and f["line"] == forward
                     for f in python_frames(snap, g["stack"])))
    assert fwd >= 3 * 16 * MiB, fwd
    # ... and by autograd's backward thread, which has no Python frames: the
    # marker says so (not "GIL not held"), the engine's frames agree.
    backward = [g for g in dev["at_peak"]
                if any("autograd6Engine11thread_main" in (f.get("symbol") or "")
                       for f in frames_of(snap, g["stack"]))]
    assert backward, "no allocation from the backward thread"
    for g in backward:
        assert markers(snap, g["stack"]) == ["autograd's backward thread: no Python frames"]
    # Adam's foreach state (exp_avg, exp_avg_sq) is allocated inside torch/optim.
    assert any(any(f["file"].endswith("adam.py") for f in python_frames(snap, g["stack"]))
               for g in dev["at_peak"])


def format_size(n):
    """PyTorch's format_size (c10/cuda/CUDACachingAllocator.cpp): how its
    OOM message prints a byte count."""
    if n <= 1024:
        return f"{n} bytes"
    if n <= 1 << 20:
        return f"{n / 1024:.2f} KiB"
    if n <= 1 << 30:
        return f"{n / (1 << 20):.2f} MiB"
    return f"{n / (1 << 30):.2f} GiB"


def test_real_oom_release_and_retry(scenario):
    r = scenario("oom_retry.py", memory="2GiB")
    t = r.torch
    assert t["raised"] and t["num_ooms"] == 1
    post = r.only("oom")
    oom = post["oom"]
    # The request is PyTorch's rounded size, as its message prints it.
    assert format_size(oom["requested_bytes"]) == t["msg"]["tried"]
    assert oom["requested_bytes"] == t["sizes"]["big"]  # a 2 MiB multiple already
    assert oom["entry_point"] == "cudaMalloc" and oom["kind"] == "device"
    # One chain: the first cudaMalloc failed, PyTorch released its cached
    # segment (the 600 MiB tensor's) and tried once more - the retry that
    # num_alloc_retries counts.
    assert oom["attempts"] == 1 + t["num_alloc_retries"] == 2
    assert oom["recovered"] is False
    assert oom["released_bytes"] == t["sizes"]["cached"] and oom["released_count"] == 1
    exit_snap = r.only("exit")
    assert exit_snap["ooms"]["count"] == 1
    assert exit_snap["ooms"]["failed_attempts"] == 2
    # PyTorch's figures (cudaMemGetInfo after the release) are ours.
    assert format_size(oom["total_bytes"]) == t["msg"]["total"]
    assert format_size(oom["free_bytes"]) == t["msg"]["free"]
    assert oom["free_bytes"] == t["free"] and oom["total_bytes"] == t["total"]
    assert format_size(oom["tracked_bytes"]) == t["msg"]["allocated"]
    assert oom["tracked_bytes"] == t["reserved"] == t["allocated"]
    if not REAL:  # a real card's context is memory no allocation accounts for
        assert oom["untracked_bytes"] == 0
    assert r.device()["current_bytes"] == t["reserved"]
