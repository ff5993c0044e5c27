/* hooks_vmm.c - virtual memory management wrappers (cuMemCreate & co.), the
 * path of PyTorch's expandable segments and of NCCL's buffers.
 *
 * Usage is physical memory: counted at cuMemCreate, by handle, and released
 * at the handle's *last* cuMemRelease (NCCL retains handles and releases
 * twice; cuMemRetainAllocationHandle adds a reference).  Address space from
 * cuMemAddressReserve is not usage; it and the mapped bytes are tracked on
 * their own so a report can say reserved vs mapped vs physical.  Handles we
 * did not create (imported from another process) are not this process's
 * memory: their mappings are ignored.  A cuMemCreate located on the host
 * (HOST, HOST_NUMA) is host memory, counted as host-pinned.
 *
 * Order: bookkeeping of map/unmap/reserve happens after a successful real
 * call; a handle's last release is taken out before the real release, like a
 * free, so a recycled handle value cannot meet a stale entry.
 */
#include "hooks.h"

#include "clock.h"

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    PFN(cuMemCreate) real = REAL(cuMemCreate);
    if (real == NULL)
        return NO_DRIVER;
    struct hook_alloc c = {.slot = SLOT_cuMemCreate, .kind = KIND_VMM,
                           .device = -1, .requested = size, .frame = HOOK_FRAME()};
    if (prop != NULL) {
        if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
            c.device = prop->location.id;
        else
            c.kind = KIND_HOST_PINNED;
    }
    if (!hooks_alloc_begin(&c, false))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(handle, size, prop, flags);
    hooks_alloc_end(&c, r == CUDA_SUCCESS, r == CUDA_ERROR_OUT_OF_MEMORY,
                    r == CUDA_SUCCESS ? (uintptr_t)*handle : 0, size, true);
    return r;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    PFN(cuMemRelease) real = REAL(cuMemRelease);
    if (real == NULL)
        return NO_DRIVER;
    struct hook_free f = {NULL, hook_enter(), false, {0}};
    if (f.traced)
        f.token = record_vmm_release((uintptr_t)handle, clock_now_ns());
    CUresult r = real(handle);
    if (f.traced && r != CUDA_SUCCESS && f.token == NULL)
        record_vmm_retain((uintptr_t)handle); /* undo the dropped reference */
    hooks_free_end(&f, r == CUDA_SUCCESS);
    return r;
}

/* The bookkeeping-only wrappers: call, then on success run `record`. */
#define VMM_AFTER(sym, params, args, record)                                   \
    CUresult sym params                                                        \
    {                                                                          \
        PFN(sym) real = REAL(sym);                                             \
        if (real == NULL)                                                      \
            return NO_DRIVER;                                                  \
        CUresult r = real args;                                                \
        if (hook_enter() && r == CUDA_SUCCESS)                                 \
            record;                                                            \
        hook_leave();                                                          \
        return r;                                                              \
    }

VMM_AFTER(cuMemRetainAllocationHandle,
          (CUmemGenericAllocationHandle *handle, void *addr), (handle, addr),
          record_vmm_retain((uintptr_t)*handle))
VMM_AFTER(cuMemMap,
          (CUdeviceptr ptr, size_t size, size_t offset,
           CUmemGenericAllocationHandle handle, unsigned long long flags),
          (ptr, size, offset, handle, flags),
          record_vmm_map(ptr, size, (uintptr_t)handle))
VMM_AFTER(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size),
          record_vmm_unmap(ptr, size))
/* Address space belongs to no device; it is shown under the current one. */
VMM_AFTER(cuMemAddressReserve,
          (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
           unsigned long long flags),
          (ptr, size, alignment, addr, flags),
          record_vmm_reserve(hooks_driver_device(), *ptr, size))
VMM_AFTER(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size),
          record_vmm_unreserve(ptr))
