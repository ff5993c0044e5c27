"""PyTorch's other allocator modes on the simulated GPU: expandable
segments, the cudaMallocAsync backend, and the per-process memory fraction
(see conftest.py for how each scenario runs)."""
from conftest import REAL, MiB, line_of, python_frames

EXPANDABLE = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
ASYNC = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}


def test_expandable_segments(scenario):
    r = scenario("expandable.py", env=EXPANDABLE)
    t = r.torch
    dev = r.device()
    vmm = dev["vmm"]
    # Physical memory (cuMemCreate handles) is what PyTorch reserved, all of
    # it mapped; nothing comes from cudaMalloc.
    assert vmm["physical_bytes"] == t["reserved"] == dev["current_bytes"]
    assert vmm["mapped_bytes"] == t["reserved"]
    assert dev["by_kind"]["vmm"]["current_bytes"] == t["reserved"]
    assert dev["peak_bytes"] == t["max_reserved"]
    assert dev["by_kind"]["device"]["allocs"] == 0
    # One address range per pool (small and large, one stream), each
    # ceil(1.125 x total / segment) x segment (20 MiB for large, 2 MiB for
    # small): the DESIGN's figure, checked.
    seg_large, seg_small = 20 * MiB, 2 * MiB
    per = [-(-(t["total"] * 9 // 8) // s) * s for s in (seg_large, seg_small)]
    assert vmm["reserved_bytes"] == sum(per), (vmm["reserved_bytes"], per)
    # Every mapping is 2 MiB (small pool) or 20 MiB (large pool).
    assert t["reserved"] % (2 * MiB) == 0


def test_expandable_segments_oom_at_cuMemCreate(scenario):
    r = scenario("expandable.py", "--oom", env=EXPANDABLE, memory="2GiB")
    t = r.torch
    assert t["raised"]
    posts = [s for s in r.snapshots if s["reason"] == "oom"]
    assert posts, [f.name for f in r.files]
    failed = [p["oom"] for p in posts if not p["oom"]["recovered"]]
    assert failed, "no post-mortem of the failure"
    oom = failed[-1]
    # The driver refused physical memory: cuMemCreate of one 20 MiB segment.
    assert oom["entry_point"] == "cuMemCreate" and oom["kind"] == "vmm"
    assert oom["requested_bytes"] == 20 * MiB
    if not REAL:  # a real driver may keep some free memory back
        assert oom["free_bytes"] < 20 * MiB <= oom["total_bytes"]
    # PyTorch mapped segment after segment, then unmapped and released them
    # all before its retry: what the retry released is seen.
    assert oom["released_bytes"] > 0 and oom["released_bytes"] % (20 * MiB) == 0
    exit_snap = r.only("exit")
    assert exit_snap["devices"][0]["vmm"]["physical_bytes"] == t["reserved"]
    assert exit_snap["devices"][0]["by_kind"]["vmm"]["failures"] >= 1


def test_expandable_oom_says_what_the_step_lacked(scenario):
    # The shortfall is measured at a 20 MiB cuMemCreate step of a request of
    # hundreds of MiB: the advice names the step with the request it serves
    # and its own free figure, never "this request lacked" beside the user's.
    import subprocess
    from conftest import CLI
    r = scenario("expandable.py", "--oom", env=EXPANDABLE, memory="2GiB")
    [(path, pm)] = [(f, s) for f, s in zip(r.files, r.snapshots)
                    if s["reason"] == "oom" and not s["oom"]["recovered"]]
    o = pm["oom"]
    assert o["entry_point"] == "cuMemCreate" and o["allocator"]["requested_bytes"] > 20 * MiB
    p = subprocess.run([str(CLI), "report", str(path)], capture_output=True, text=True,
                       timeout=60, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "this request lacked" not in text, text
    assert "the 20.0 MiB cuMemCreate for PyTorch's" in text, text
    assert " request lacked " in text and "MiB (free " in text, text


def test_cuda_malloc_async_backend(scenario):
    r = scenario("async_backend.py", env=ASYNC)
    t = r.torch
    snap = r.only("exit")
    dev = r.device()
    a = dev["by_kind"]["async"]
    # Every tensor is a cudaMallocAsync: what PyTorch calls allocated is the
    # pool's used memory, and ours.
    assert a["current_bytes"] == t["allocated"] == t["stats_allocated"]
    assert a["peak_bytes"] == t["max_allocated"]
    assert dev["by_kind"]["device"]["allocs"] == 0
    assert a["allocs"] == 9 and a["frees"] == 6  # 4 kept, 5 temporaries, 1 del
    for g in dev["live"]:
        assert g["kind"] == "async"
        entry = next(s["entry"] for s in snap["stacks"] if s["id"] == g["stack"])
        assert entry == "cudaMallocAsync"
        lines = {f["line"] for f in python_frames(snap, g["stack"])
                 if f["file"].endswith("async_backend.py")}
        assert lines == {line_of("async_backend.py", "ALLOC")}
    # The pool's reserved memory (PyTorch's memory_reserved here) held what
    # was used, and empty_cache trimmed the cached blocks back to the device.
    assert t["reserved_before_trim"] >= t["max_allocated"]
    assert t["allocated"] <= t["reserved"] < t["reserved_before_trim"]
    assert t["max_reserved"] == t["reserved_before_trim"]


def test_per_process_memory_fraction(scenario):
    r = scenario("fraction.py", memory="8GiB")
    t = r.torch
    assert t["raised"] and t["num_ooms"] == 1
    dev = r.device()
    # PyTorch refused above its quarter of the card without asking CUDA:
    # the driver saw one successful cudaMalloc and no failure.
    assert dev["by_kind"]["device"]["allocs"] == t["segments_allocated"] == 1
    assert dev["by_kind"]["device"]["failures"] == 0
    exit_snap = r.only("exit")
    # The one failed attempt on record is PyTorch's own refusal (the tracker
    # counts an allocator's refusal as one attempt), not a CUDA call.
    assert exit_snap["ooms"]["failed_attempts"] == 1
    assert [a["requested_bytes"] for a in exit_snap["ooms"]["attempts"]] == [t["sizes"]["more"]]
    assert dev["current_bytes"] == t["reserved"]
    # ... yet PyTorch counts a retry: it frees its cache and asks itself again.
    assert t["num_alloc_retries"] == 1
    # The tracer learns of the refusal from PyTorch's OOM observer.
    posts = [s for s in r.snapshots if s["reason"] == "oom"]
    assert len(posts) == 1
    oom = posts[0]["oom"]
    assert oom["entry_point"] == "pytorch" and oom["cause"] == "allocator_limit"
    assert oom["requested_bytes"] == t["sizes"]["more"]
    assert oom["allocator"]["limit_bytes"] == t["total"] // 4
