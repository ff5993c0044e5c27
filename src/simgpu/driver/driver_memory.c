/* driver_memory.c - linear, pitched, managed and pinned-host memory of the
 * simulated driver, and the table of live allocations every kind shares
 * (stream-ordered allocations and their pools are driver_pool.c's).
 *
 * Every live allocation is one struct sim_alloc in driver.allocs, keyed by
 * the pointer the caller got; freeing anything else is
 * CUDA_ERROR_INVALID_VALUE, as on NVIDIA's driver.  Device memory is placed
 * by driver_vaspace.c; its address is the device's base plus the placement
 * offset, so addresses say where the bytes are.
 *
 * Kinds:
 *  - linear (cuMemAlloc_v2, cuMemAllocPitch_v2): placed first fit.
 *  - v1 (cuMemAlloc, cuMemAllocPitch): placed the same way, but the pointer
 *    comes from a 32-bit window shared by all devices, because the pre-3.2
 *    ABI stores it in an unsigned int.
 *  - managed: real host memory (mmap MAP_NORESERVE: programs may touch it),
 *    charged to the device as if resident, in whole pages, no contiguity.
 *  - pinned host: real page-aligned host memory, charged to no device,
 *    owned by the context it was made in (freed with it).
 *  - async: placed here like linear memory and charged to its pool by
 *    driver_pool.c; cuMemFree frees it here as well.
 *
 * Every memory call needs a current context (CUDA_ERROR_INVALID_CONTEXT
 * otherwise).  A zero size is CUDA_ERROR_INVALID_VALUE everywhere.  All
 * functions take driver.lock.
 */
#include "driver_impl.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

struct sim_alloc *driver_memory_find(uint64_t addr)
{
    struct sim_alloc *a = NULL;
    HASH_FIND(hh, driver.allocs, &addr, sizeof addr, a);
    return a;
}

void driver_memory_add(struct sim_alloc *a)
{
    HASH_ADD(hh, driver.allocs, addr, sizeof a->addr, a);
}

/* Records a (its addr already set) as `size` bytes of `kind` made on dev in
 * the current context. */
static void record_alloc(struct sim_alloc *a, uint64_t size, enum sim_alloc_kind kind, int dev)
{
    a->size = size;
    a->kind = kind;
    a->device = dev;
    a->ctx = driver_current_context();
    driver_memory_add(a);
}

void driver_memory_release_block(struct sim_alloc *a)
{
    struct sim_device *sd = &driver.dev[a->device];
    if (a->paged)
        driver_vaspace_range_free(&sd->linear, a->addr, a->block.npages * SIM_PAGE);
    driver_vaspace_release(&sd->pages, &a->block);
    a->paged = 0;
}

static void release_alloc(struct sim_alloc *a)
{
    driver_memory_release_block(a);
    if (a->kind == AK_LINEAR_V1)
        driver_vaspace_range_free(&driver.v1, a->addr, round_up(a->size, SIM_UNIT));
    if (a->kind == AK_MANAGED || a->kind == AK_HOST)
        munmap((void *)(uintptr_t)a->addr, a->map_len);
    if (a->pool != NULL)
        driver_pool_drop(a);
    HASH_DEL(driver.allocs, a);
    free(a);
}

void driver_memory_free_context(struct CUctx_st *c)
{
    /* cuCtxDestroy's documentation: the context's cuMemAlloc, cuMemAllocPitch,
     * cuMemAllocManaged and cuMemAllocHost memory goes with it; pool memory
     * (cuMemAllocAsync, cuMemAllocFromPoolAsync) and cuMemCreate handles are
     * "not associated with any CUDA context" and stay. */
    struct sim_alloc *a, *tmp;
    HASH_ITER(hh, driver.allocs, a, tmp) {
        if (a->ctx == c && a->kind != AK_ASYNC)
            release_alloc(a);
    }
}

CUresult driver_memory_place(int dev, uint64_t size, enum sim_alloc_kind kind,
                             struct sim_alloc **out)
{
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    driver_charge_reserved(dev);
    struct sim_device *sd = &driver.dev[dev];
    /* paged: scattered pages behind a contiguous range of addresses */
    int paged = sd->paged && size >= SIM_LARGE_MIN && kind != AK_LINEAR_V1;
    uint64_t npages = size / SIM_PAGE + (size % SIM_PAGE != 0);
    if (paged ? driver_vaspace_scatter(&sd->pages, npages, &a->block) != 0
              : driver_vaspace_place(&sd->pages, size, &a->block) != 0) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (paged) {
        if (driver_vaspace_range_alloc(&sd->linear, npages * SIM_PAGE, SIM_PAGE, 0,
                                       &a->addr) != 0) {
            driver_vaspace_release(&sd->pages, &a->block);
            free(a);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        a->paged = 1;
    } else if (kind == AK_LINEAR_V1) {
        if (driver_vaspace_range_alloc(&driver.v1, round_up(size, SIM_UNIT), SIM_UNIT, 0,
                                       &a->addr) != 0) {
            driver_vaspace_release(&driver.dev[dev].pages, &a->block);
            free(a);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else {
        a->addr = SIM_DEV_BASE + (uint64_t)dev * SIM_DEV_STRIDE +
                  driver_vaspace_offset(&a->block);
    }
    record_alloc(a, size, kind, dev);
    *out = a;
    return CUDA_SUCCESS;
}

/* ---- linear memory ---- */

/* cuMemAlloc* and cuMemAllocPitch*: `size` already validated. */
static CUresult alloc_linear(uint64_t size, enum sim_alloc_kind kind, uint64_t *addr)
{
    int dev;
    driver_lock();
    CUresult r = driver_current_device(&dev);
    struct sim_alloc *a = NULL;
    if (r == CUDA_SUCCESS)
        r = driver_memory_place(dev, size, kind, &a);
    if (r == CUDA_SUCCESS)
        *addr = a->addr;
    driver_unlock();
    return r;
}

/* cuMemAlloc*: out_ok says the caller gave somewhere to store the pointer. */
static CUresult alloc_plain(int out_ok, uint64_t size, enum sim_alloc_kind kind, uint64_t *addr)
{
    CUresult r = driver_ready_args(!out_ok || size == 0);
    /* SIMCUDA_WAIT_BYTES is cuMemAlloc_v2's (cudaMalloc's) alone; no lock is held here */
    if (r == CUDA_SUCCESS && kind == AK_LINEAR && driver.wait_bytes != 0 &&
        size == driver.wait_bytes)
        pause();
    if (r == CUDA_SUCCESS)
        r = alloc_linear(size, kind, addr);
    return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    DRIVER_ENTER(cuMemAlloc_v2);
    uint64_t addr = 0;
    CUresult r = alloc_plain(dptr != NULL, bytesize, AK_LINEAR, &addr);
    if (r == CUDA_SUCCESS)
        *dptr = addr;
    return driver_leave(SYM_cuMemAlloc_v2, r, "(%zu) -> 0x%llx", bytesize,
                        (unsigned long long)addr);
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    DRIVER_ENTER(cuMemAlloc);
    uint64_t addr = 0;
    CUresult r = alloc_plain(dptr != NULL, bytesize, AK_LINEAR_V1, &addr);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)addr;
    return driver_leave(SYM_cuMemAlloc, r, "(%u) -> 0x%llx", bytesize,
                        (unsigned long long)addr);
}

/* Pitch as cudaMallocPitch documents it: the width rounded up to the
 * texture pitch alignment, 512 bytes on current GPUs.  0 when the arguments
 * are invalid or the size overflows. */
static uint64_t pitch_size(uint64_t width, uint64_t height, unsigned int elem, uint64_t *pitch)
{
    if (width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16) ||
        width > UINT64_MAX - 511)
        return 0;
    *pitch = round_up(width, 512);
    if (height > UINT64_MAX / *pitch)
        return 0;
    return *pitch * height;
}

/* cuMemAllocPitch*: outs_ok says both out pointers are given; a pitch above
 * max_pitch does not fit the caller's ABI.  *pitch stays as it is unless the
 * checks get as far as pitch_size. */
static CUresult alloc_pitched(int outs_ok, uint64_t width, uint64_t height, unsigned int elem,
                              uint64_t max_pitch, enum sim_alloc_kind kind, uint64_t *addr,
                              uint64_t *pitch)
{
    uint64_t size = 0;
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS &&
        (!outs_ok || (size = pitch_size(width, height, elem, pitch)) == 0 || *pitch > max_pitch))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = alloc_linear(size, kind, addr);
    return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                            size_t Height, unsigned int ElementSizeBytes)
{
    DRIVER_ENTER(cuMemAllocPitch_v2);
    uint64_t addr = 0, pitch = 0;
    CUresult r = alloc_pitched(dptr != NULL && pPitch != NULL, WidthInBytes, Height,
                               ElementSizeBytes, UINT64_MAX, AK_LINEAR, &addr, &pitch);
    if (r == CUDA_SUCCESS) {
        *dptr = addr;
        *pPitch = pitch;
    }
    return driver_leave(SYM_cuMemAllocPitch_v2, r, "(%zu, %zu, %u) -> 0x%llx pitch %llu",
                        WidthInBytes, Height, ElementSizeBytes, (unsigned long long)addr,
                        (unsigned long long)pitch);
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                         unsigned int Height, unsigned int ElementSizeBytes)
{
    DRIVER_ENTER(cuMemAllocPitch);
    uint64_t addr = 0, pitch = 0;
    CUresult r = alloc_pitched(dptr != NULL && pPitch != NULL, WidthInBytes, Height,
                               ElementSizeBytes, UINT32_MAX, AK_LINEAR_V1, &addr, &pitch);
    if (r == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)addr;
        *pPitch = (unsigned int)pitch;
    }
    return driver_leave(SYM_cuMemAllocPitch, r, "(%u, %u, %u) -> 0x%llx pitch %llu",
                        WidthInBytes, Height, ElementSizeBytes, (unsigned long long)addr,
                        (unsigned long long)pitch);
}

/* cuMemFree*: device, v1, managed and async memory; 0 is a no-op. */
static CUresult free_device_ptr(uint64_t dptr)
{
    int dev;
    CUresult r = driver_ready();
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    r = driver_current_device(&dev);
    if (r == CUDA_SUCCESS && dptr != 0) {
        struct sim_alloc *a = driver_memory_find(dptr);
        if (a == NULL || a->kind == AK_HOST)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            release_alloc(a);
    }
    driver_unlock();
    return r;
}

DRIVER_CALL(cuMemFree_v2, (CUdeviceptr dptr), free_device_ptr(dptr), "(0x%llx)", dptr)
DRIVER_CALL(cuMemFree, (CUdeviceptr_v1 dptr), free_device_ptr(dptr), "(0x%x)", dptr)

/* ---- what is free ---- */

/* free = capacity - pages held x 2 MiB - SIMCUDA_RESERVED (once charged)
 * - what other processes hold (SIMCUDA_SHARED): shared pages count whole,
 * as on a real GPU.  outs_ok: the caller gave both out pointers. */
static CUresult mem_info(int outs_ok, uint64_t *free_bytes, uint64_t *total)
{
    int dev;
    CUresult r = driver_ready_args(!outs_ok);
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    r = driver_current_device(&dev);
    if (r == CUDA_SUCCESS) {
        const struct sim_device *sd = &driver.dev[dev];
        uint64_t used = driver_vaspace_used(&sd->pages) * SIM_PAGE;
        if (sd->reserved_charged)
            used += sd->reserved;
        used += driver_shared_others_pages(dev) * SIM_PAGE;
        *free_bytes = used >= sd->capacity ? 0 : sd->capacity - used;
        *total = sd->capacity;
    }
    driver_unlock();
    return r;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    DRIVER_ENTER(cuMemGetInfo_v2);
    uint64_t f = 0, t = 0;
    CUresult r = mem_info(free != NULL && total != NULL, &f, &t);
    if (r == CUDA_SUCCESS) {
        *free = f;
        *total = t;
    }
    return driver_leave(SYM_cuMemGetInfo_v2, r, "() -> %llu of %llu", (unsigned long long)f,
                        (unsigned long long)t);
}

CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    DRIVER_ENTER(cuMemGetInfo);
    uint64_t f = 0, t = 0;
    CUresult r = mem_info(free != NULL && total != NULL, &f, &t);
    if (r == CUDA_SUCCESS) { /* the 32-bit ABI clamps */
        *free = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
        *total = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    }
    return driver_leave(SYM_cuMemGetInfo, r, "() -> %llu of %llu", (unsigned long long)f,
                        (unsigned long long)t);
}

/* ---- managed and pinned host memory: real, writable host pages ---- */

static void *map_host(uint64_t size, size_t *len, int noreserve)
{
    long page = sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX - (uint64_t)page)
        return NULL;
    *len = (size_t)round_up(size, (uint64_t)page);
    void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0), -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* With the lock held: `size` bytes of real host memory made on dev and
 * recorded as `kind` - AK_MANAGED, charged to dev in whole pages and mapped
 * MAP_NORESERVE, or AK_HOST, charged to no device.  The memory in *out;
 * CUDA_ERROR_OUT_OF_MEMORY when the pages or the mapping cannot be had. */
static CUresult new_host_alloc(int dev, uint64_t size, enum sim_alloc_kind kind, void **out)
{
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int managed = kind == AK_MANAGED;
    struct driver_vaspace_pages *pages = &driver.dev[dev].pages;
    if (managed) {
        driver_charge_reserved(dev);
        if (driver_vaspace_scatter(pages, size / SIM_PAGE + (size % SIM_PAGE != 0),
                                   &a->block) != 0) {
            free(a);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    void *p = map_host(size, &a->map_len, managed);
    if (p == NULL) {
        if (managed)
            driver_vaspace_release(pages, &a->block);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->addr = (uint64_t)(uintptr_t)p;
    record_alloc(a, size, kind, dev);
    *out = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    DRIVER_ENTER(cuMemAllocManaged);
    uint64_t addr = 0;
    int dev;
    CUresult r = driver_ready_args(dptr == NULL || bytesize == 0 ||
                                   (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST));
    if (r == CUDA_SUCCESS) {
        void *p = NULL;
        driver_lock();
        r = driver_current_device(&dev);
        if (r == CUDA_SUCCESS)
            r = new_host_alloc(dev, bytesize, AK_MANAGED, &p);
        if (r == CUDA_SUCCESS)
            *dptr = addr = (uint64_t)(uintptr_t)p;
        driver_unlock();
    }
    return driver_leave(SYM_cuMemAllocManaged, r, "(%zu, %u) -> 0x%llx", bytesize, flags,
                        (unsigned long long)addr);
}

static CUresult host_alloc(void **pp, uint64_t size, unsigned int flags)
{
    const unsigned int known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                               CU_MEMHOSTALLOC_WRITECOMBINED;
    int dev;
    CUresult r = driver_ready_args(pp == NULL || size == 0 || (flags & ~known) != 0);
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    r = driver_current_device(&dev);
    if (r == CUDA_SUCCESS)
        r = new_host_alloc(dev, size, AK_HOST, pp);
    driver_unlock();
    return r;
}

DRIVER_CALL(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags),
            host_alloc(pp, bytesize, Flags), "(%zu, 0x%x) -> %p", bytesize, Flags,
            r == CUDA_SUCCESS ? *pp : NULL)
DRIVER_CALL(cuMemAllocHost_v2, (void **pp, size_t bytesize), host_alloc(pp, bytesize, 0),
            "(%zu) -> %p", bytesize, r == CUDA_SUCCESS ? *pp : NULL)
DRIVER_CALL(cuMemAllocHost, (void **pp, unsigned int bytesize), host_alloc(pp, bytesize, 0),
            "(%u) -> %p", bytesize, r == CUDA_SUCCESS ? *pp : NULL)

CUresult cuMemFreeHost(void *p)
{
    DRIVER_ENTER(cuMemFreeHost);
    int dev;
    CUresult r = driver_ready_args(p == NULL);
    if (r == CUDA_SUCCESS) {
        driver_lock();
        r = driver_current_device(&dev);
        if (r == CUDA_SUCCESS) {
            struct sim_alloc *a = driver_memory_find((uint64_t)(uintptr_t)p);
            if (a == NULL || a->kind != AK_HOST)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                release_alloc(a);
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemFreeHost, r, "(%p)", p);
}

/* Device memory of any kind but host: linear, async and VMM-mapped
 * addresses (driver_vmm.c answers for the last). */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    DRIVER_ENTER(cuMemGetAddressRange_v2);
    CUresult r = driver_ready();
    uint64_t base = 0, size = 0;
    if (r == CUDA_SUCCESS) {
        driver_lock();
        r = CUDA_ERROR_NOT_FOUND;
        struct sim_alloc *a, *tmp;
        HASH_ITER(hh, driver.allocs, a, tmp) {
            if (a->kind != AK_HOST && dptr >= a->addr && dptr < a->addr + (a->size ? a->size : 1)) {
                base = a->addr;
                size = a->size;
                r = CUDA_SUCCESS;
                break;
            }
        }
        if (r != CUDA_SUCCESS && driver_vmm_range(dptr, &base, &size))
            r = CUDA_SUCCESS;
        driver_unlock();
    }
    if (r == CUDA_SUCCESS) {
        if (pbase != NULL)
            *pbase = base;
        if (psize != NULL)
            *psize = size;
    }
    return driver_leave(SYM_cuMemGetAddressRange_v2, r, "(0x%llx) -> 0x%llx + %llu", dptr,
                        (unsigned long long)base, (unsigned long long)size);
}
