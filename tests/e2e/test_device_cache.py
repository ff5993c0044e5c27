"""The current device is cached per thread (src/preload/interpose/call_state.c):
asked of the runtime or driver once, not per allocation, and forgotten by
every call that can change it - cudaSetDevice, cuCtxSetCurrent,
cuCtxPushCurrent/PopCurrent, cuCtxCreate, a context destroyed - so each
allocation still lands on the right device."""
from conftest import MiB, device


def test_attribution_follows_every_switch(run):
    # rt_devices.c says which device each 2^k MiB allocation is made on
    snap = run(["rt_devices", "switch"], env={"SIMCUDA_DEVICES": "3"}).only()
    held = {d: device(snap, d)["current_bytes"] // MiB for d in (0, 1, 2)}
    assert held == {0: 1 + 4 + 8 + 1024, 1: 2 + 64 + 512, 2: 16 + 32 + 128}, held


def test_the_device_is_not_asked_per_allocation(run):
    # was: one cudaGetDevice (runtime path) or cuCtxGetDevice (driver path)
    # per allocation, 93 instructions of the runtime's per pair
    n = 200
    res = run(["rt_devices", "repeat", n], env={"SIMCUDA_LOG": "1"})
    lines = res.stderr.splitlines()
    allocs = sum(": cudaMalloc(" in l for l in lines)
    drv = sum(": cuMemAlloc_v2(" in l for l in lines)
    asked_rt = sum(": cudaGetDevice(" in l for l in lines)
    asked_drv = sum(": cuCtxGetDevice(" in l for l in lines)
    assert allocs == n and drv >= 2 * n, (allocs, drv)
    assert asked_rt <= 3 and asked_drv <= 3, (asked_rt, asked_drv)
    snap = res.only()
    assert device(snap)["by_kind"]["device"]["allocs"] == 2 * n
