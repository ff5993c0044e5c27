"""Every path to a CUDA allocation lands on a wrapper, and each allocation is
counted exactly once, with exact bytes, per kind (issue: complete
interception).  Scenarios live in tests/progs/*.c."""
import re

import pytest

from conftest import MiB, bytes_from, device, entry, groups_by_entry, stacks

PITCH = 1024  # the simulated device pitches 1000-byte rows to 1024


def check_basic(snap, alloc_entry):
    d = device(snap)
    k = d["by_kind"]
    pitched = PITCH * 100
    cube = PITCH * 10 * 10
    assert k["device"]["allocs"] == 4
    assert k["device"]["frees"] == 3
    assert k["device"]["current_bytes"] == 64 * MiB
    assert k["device"]["peak_bytes"] == 96 * MiB + pitched + cube
    assert k["managed"]["current_bytes"] == 8 * MiB
    assert k["async"] == {**k["async"], "current_bytes": 0,
                          "peak_bytes": 16 * MiB, "allocs": 1, "frees": 1}
    assert d["current_bytes"] == 72 * MiB
    assert d["peak_bytes"] == 120 * MiB + pitched + cube
    # at_peak sums exactly to the peak, and names the call sites
    assert sum(g["bytes"] for g in d["at_peak"]) == d["peak_bytes"]
    assert bytes_from(d["at_peak"], snap, "alloc_weights") == 64 * MiB
    assert bytes_from(d["at_peak"], snap, "alloc_activations") == 32 * MiB
    # what is still live at exit: weights and managed
    assert sum(g["bytes"] for g in d["live"]) == 72 * MiB
    assert bytes_from(d["live"], snap, "alloc_weights") == 64 * MiB
    assert bytes_from(d["live"], snap, "alloc_activations") == 0
    weights = [g for g in d["live"] if g["bytes"] == 64 * MiB][0]
    assert entry(snap, weights["stack"]) == alloc_entry
    hp = snap["host_pinned"]
    assert (hp["current_bytes"], hp["peak_bytes"], hp["allocs"], hp["frees"]) == \
        (4 * MiB, 5 * MiB, 2, 1)


def test_shared_runtime_records_at_the_runtime_call_once(run):
    r = run(["rt_workload", "basic"])
    snap = r.only("exit")
    check_basic(snap, "cudaMalloc")
    entries = {s["entry"] for s in snap["stacks"]}
    # the runtime reached the driver through our cuGetProcAddress wrapper,
    # yet nothing was counted twice at the driver level
    assert not entries & {"cuMemAlloc_v2", "cuMemHostAlloc", "cuMemAllocAsync"}
    assert {"cudaMalloc", "cudaMallocHost", "cudaMallocManaged",
            "cudaMallocPitch", "cudaMalloc3D", "cudaMallocAsync"} <= entries


def test_static_runtime_is_seen_at_the_driver(run):
    r = run(["static_workload", "basic"])
    snap = r.only("exit")
    check_basic(snap, "cuMemAlloc_v2")
    entries = {s["entry"] for s in snap["stacks"]}
    assert {"cuMemAlloc_v2", "cuMemHostAlloc", "cuMemAllocManaged",
            "cuMemAllocPitch_v2", "cuMemAllocAsync"} <= entries


def test_driver_linked_directly(run):
    r = run(["drv_workload", "kinds"])
    d = device(r.only("exit"))
    k = d["by_kind"]
    assert k["device"]["allocs"] == 3 and k["device"]["frees"] == 2
    assert k["device"]["current_bytes"] == 6 * MiB
    assert k["managed"]["peak_bytes"] == 4 * MiB
    assert k["managed"]["current_bytes"] == 0
    assert k["async"]["peak_bytes"] == 12 * MiB
    assert k["async"]["current_bytes"] == 0
    hp = r.only("exit")["host_pinned"]
    assert (hp["peak_bytes"], hp["current_bytes"], hp["allocs"], hp["frees"]) \
        == (4 * MiB, 0, 2, 2)


def test_dlopen_dlsym_and_cugetprocaddress(run):
    r = run(["dl_driver"])
    snap = r.only("exit")
    d = device(snap)
    assert d["by_kind"]["device"]["allocs"] == 2
    assert d["by_kind"]["device"]["frees"] == 1
    assert d["current_bytes"] == 9 * MiB
    assert groups_by_entry(d["live"], snap) == {"cuMemAlloc_v2": 9 * MiB}


def test_driver_entry_point_vmm(run):
    snap = run(["rt_workload", "entrypoint"]).only("exit")
    d = device(snap)
    assert d["by_kind"]["vmm"]["current_bytes"] == 20 * MiB
    assert d["by_kind"]["vmm"]["peak_bytes"] == 40 * MiB
    assert d["vmm"]["reserved_bytes"] == 64 * MiB
    assert d["vmm"]["mapped_bytes"] == 20 * MiB
    assert d["vmm"]["mapped_peak_bytes"] == 40 * MiB
    assert d["vmm"]["physical_bytes"] == 20 * MiB
    assert groups_by_entry(d["live"], snap) == {"cuMemCreate": 20 * MiB}


def test_vmm_cleanup_returns_everything(run):
    snap = run(["rt_workload", "entrypoint"],
               env={"WORKLOAD_VMM_CLEANUP": "1"}).only("exit")
    d = device(snap)
    assert d["current_bytes"] == 0
    assert d["vmm"] == {**d["vmm"], "reserved_bytes": 0, "mapped_bytes": 0,
                        "physical_bytes": 0}


def test_vmm_physical_freed_at_last_release(run):
    r = run(["drv_workload", "vmm"], env={"WORKLOAD_DUMP_MID": "1"})
    mid = [s for s in r.snapshots if s["reason"] == "api"]
    assert len(mid) == 0  # named mid.json, not cumemtrace.*
    import json
    mid = json.loads((r.cwd / "mid.json").read_text())
    assert device(mid)["by_kind"]["vmm"]["current_bytes"] == 8 * MiB
    end = r.only("exit")
    k = device(end)["by_kind"]["vmm"]
    assert (k["current_bytes"], k["peak_bytes"], k["allocs"], k["frees"]) == \
        (0, 8 * MiB, 1, 1)
    # cuMemCreate on a host NUMA node is host memory
    assert end["host_pinned"]["current_bytes"] == 4 * MiB


def test_debug_log_says_how_each_entry_point_was_resolved(run):
    r = run(["rt_workload", "basic"], env={"CUMEMTRACE_LOG": "debug"})
    assert re.search(r'cuGetProcAddress\("cuMemAlloc", version 3020, flags 0\) '
                     r'-> wrapper cuMemAlloc_v2', r.stderr), r.stderr
    assert 'dlsym(' in r.stderr and '"cuGetProcAddress_v2") -> cumemtrace wrapper' in r.stderr
    assert "wrapped cudaMalloc: real function by dynamic link" in r.stderr
    assert re.search(r'"cuMemAllocAsync", version 11020, flags 2\) -> wrapper '
                     r'cuMemAllocAsync_ptsz', r.stderr), r.stderr


def test_stacks_carry_module_offset_and_symbol(run):
    snap = run(["rt_workload", "basic"]).only("exit")
    for s in snap["stacks"]:
        for f in s["frames"]:
            assert set(f) >= {"module", "offset", "symbol"}
            assert "/" not in f["module"]
            assert f["module"] != "libcumemtrace.so"  # our frames are skipped
    frames = [f for s in snap["stacks"] for f in s["frames"]]
    assert any(f["module"] == "rt_workload" and f["symbol"] == "main"
               for f in frames)


def test_device_reset_frees_linear_managed_and_pinned_memory(run):
    snap = run(["rt_workload", "reset"]).only("exit")
    d = device(snap)
    k = d["by_kind"]
    assert k["device"]["current_bytes"] == 1 * MiB
    assert k["device"]["frees"] == 1 and k["managed"]["frees"] == 1
    assert k["managed"]["current_bytes"] == 0
    # NVIDIA (cuCtxDestroy): pool allocations belong to no context and stay
    assert k["async"]["current_bytes"] == 4 * MiB
    assert d["peak_bytes"] == 14 * MiB
    hp = snap["host_pinned"]  # cudaMallocHost memory went with the context
    assert (hp["current_bytes"], hp["frees"], hp["live"]) == (0, 1, [])
    assert snap["counters"]["unknown_frees"] == 1  # the program's late cudaFreeHost


@pytest.mark.parametrize("scenario", ["release", "reset"])
def test_context_destroy_frees_tracked_memory_and_the_limit_sees_it(run, scenario):
    # 48 MiB twice under a 64 MiB limit: the second fits only if the tracker
    # saw the driver free the first (last primary release, or reset)
    r = run(["drv_workload", scenario], env={"CUMEMTRACE_LIMIT": "64MiB"})
    snap = r.only("exit")
    k = device(snap)["by_kind"]
    assert k["device"]["current_bytes"] == 48 * MiB
    assert k["device"]["frees"] == 1
    assert snap["host_pinned"]["current_bytes"] == 0
    assert snap["ooms"]["count"] == 0
    if scenario == "release":
        assert k["managed"]["current_bytes"] == 0
        assert k["async"]["current_bytes"] == 2 * MiB


def test_runtime_teardown_at_exit_leaves_leaks_reported(run):
    # the primary context released to zero by an exit handler (NVIDIA's
    # runtime does so): what was still held is a leak, shown live at exit
    snap = run(["drv_workload", "exit_teardown"]).only("exit")
    k = device(snap)["by_kind"]["device"]
    assert (k["current_bytes"], k["frees"]) == (8 * MiB, 0)


def test_created_context_destroy_frees_only_its_memory(run):
    r = run(["drv_workload", "created"], env={"CUMEMTRACE_LIMIT": "64MiB"})
    snap = r.only("exit")
    k = device(snap)["by_kind"]
    # the primary context's 8 MiB stays; the created one's 48 MiB went
    assert (k["device"]["current_bytes"], k["device"]["frees"]) == (56 * MiB, 1)
    assert k["async"]["current_bytes"] == 2 * MiB  # a pool's, not the context's
    assert snap["host_pinned"]["current_bytes"] == 0
    assert snap["ooms"]["count"] == 0


def test_more_contexts_than_the_tracker_numbers_free_their_memory(run):
    """Past 958 created contexts alive at once, the
    later ones' memory outlived their destroy (484 MiB counted as held)
    and CUMEMTRACE_LIMIT refused what the bare run grants."""
    r = run(["drv_workload", "many_contexts"], env={"CUMEMTRACE_LIMIT": "2500MiB"})
    snap = r.only("exit")
    k = device(snap)["by_kind"]["device"]
    assert (k["current_bytes"], k["frees"]) == (2400 * MiB, 1200), k
    assert snap["host_pinned"]["current_bytes"] == 0, snap["host_pinned"]
    assert snap["ooms"]["count"] == 0


# ---- fault siblings: the simulated device fails a chosen call ----

def test_failed_free_keeps_the_allocation_live(run):
    # the 2nd cuMemFree_v2 (drv_workload frees pitched, then ...) fails once
    r = run(["drv_workload", "kinds"], env={"SIMCUDA_FAIL": "cuMemFree_v2:1=1"},
            check=False)
    assert r.returncode == 1  # the program sees the injected error unchanged
    assert "cuMemFree_v2(pitched) returned 1, expected 0" in r.stderr
    snap = r.only("exit")
    assert snap["counters"]["failed_frees"] == 1
    k = device(snap)["by_kind"]["device"]
    assert k["frees"] == 0
    pitched = k["current_bytes"] - 6 * MiB - 2 * MiB
    assert pitched == 1024 * 64  # still counted: the real free failed


def test_failed_vmm_create_is_an_oom_of_kind_vmm(run):
    r = run(["drv_workload", "vmm"], env={"SIMCUDA_FAIL": "cuMemCreate:1"},
            check=False)
    assert r.returncode == 1
    [pm] = [s for s in r.snapshots if s["reason"] == "oom"]
    assert (pm["oom"]["kind"], pm["oom"]["entry_point"]) == ("vmm", "cuMemCreate")
    assert device(r.only("exit"))["by_kind"]["vmm"]["failures"] == 1


def test_failed_runtime_init_is_passed_through(run):
    # every cuMemAlloc_v2 fails with CUDA_ERROR_UNKNOWN (999): not an OOM
    r = run(["rt_workload", "basic"], env={"SIMCUDA_FAIL": "cuMemAlloc_v2:1+=999"},
            check=False)
    assert r.returncode == 1
    assert "returned 999" in r.stderr
    assert [s for s in r.snapshots if s["reason"] == "oom"] == []


def test_runtime_loaded_late_and_locally_is_found(run):
    # before libcudart is loaded the wrapper answers "no driver" (35), as the
    # API does without one; once it is loaded RTLD_LOCAL it is found
    r = run(["late_runtime"])
    assert r.stdout == "ok\n"
    d = device(r.only())
    assert d["current_bytes"] == 3 * MiB
    assert d["by_kind"]["device"]["allocs"] == 1
