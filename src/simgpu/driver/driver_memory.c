/* driver_memory.c - linear, pitched, managed, pinned-host and stream-ordered
 * memory of the simulated driver, and memory pools.
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
 *  - async: placed like linear memory and charged at once (the block is
 *    what the pool reserves for it: whole 2 MiB pages from 1 MiB up, 512-byte
 *    units of a shared page below).  cuMemFreeAsync keeps the block in the
 *    pool for reuse by a later allocation it fits (best fit), as long as the
 *    pool's reserved bytes stay within its release threshold (default 0:
 *    given back at once; NVIDIA gives it back at the next synchronisation,
 *    which on a device whose work completes at once is the same).
 *    cuMemPoolTrimTo releases cached blocks; an allocation that does not fit
 *    releases the pool's cached blocks and tries once more.  Pool attributes
 *    report reserved (blocks held) and used (bytes asked for) memory.  A pool
 *    destroyed while allocations are live stays until the last of them is
 *    freed, as documented.
 *
 * Every memory call needs a current context (CUDA_ERROR_INVALID_CONTEXT
 * otherwise); pools and the default pool only need cuInit.  A zero size is
 * CUDA_ERROR_INVALID_VALUE everywhere.  All functions take driver.lock.
 */
#include "driver_impl.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

static struct sim_alloc *find_alloc(uint64_t addr)
{
    struct sim_alloc *a = NULL;
    HASH_FIND(hh, driver.allocs, &addr, sizeof addr, a);
    return a;
}

static void add_alloc(struct sim_alloc *a)
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
    add_alloc(a);
}

static struct CUmemPoolHandle_st *new_pool(int device, int is_default, uint64_t max_size)
{
    struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->device = device;
    p->is_default = is_default;
    p->max_size = max_size;
    p->next = driver.pools;
    driver.pools = p;
    return p;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Device bytes a placement holds. */
static uint64_t footprint_of(const struct driver_vaspace_block *b)
{
    if (b->kind == VB_SMALL)
        return (uint64_t)b->units * SIM_UNIT;
    return b->npages * SIM_PAGE;
}

/* Gives back a's device pages, and its address when it was paged. */
static void release_block(struct sim_alloc *a)
{
    struct sim_device *sd = &driver.dev[a->device];
    if (a->paged)
        driver_vaspace_range_free(&sd->linear, a->addr, a->block.npages * SIM_PAGE);
    driver_vaspace_release(&sd->pages, &a->block);
    a->paged = 0;
}

/* Releases cached blocks of p until it reserves at most `keep` bytes. */
static void trim_pool(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    while (p->reserved > keep && p->cached != NULL) {
        struct sim_alloc *a = p->cached;
        p->cached = a->next_cached;
        release_block(a);
        p->reserved -= a->footprint;
        free(a);
    }
}

static void free_pool(struct CUmemPoolHandle_st *p)
{
    trim_pool(p, 0);
    struct CUmemPoolHandle_st **pp = &driver.pools;
    while (*pp != p)
        pp = &(*pp)->next;
    *pp = p->next;
    free(p);
}

/* Whether pool is a pool that may still be used (not destroyed). */
static int usable_pool(CUmemoryPool pool)
{
    for (struct CUmemPoolHandle_st *p = driver.pools; p != NULL; p = p->next)
        if (p == pool)
            return !p->destroyed;
    return 0;
}

static void release_alloc(struct sim_alloc *a)
{
    release_block(a);
    if (a->kind == AK_LINEAR_V1)
        driver_vaspace_range_free(&driver.v1, a->addr, round_up(a->size, SIM_UNIT));
    if (a->kind == AK_MANAGED || a->kind == AK_HOST)
        munmap((void *)(uintptr_t)a->addr, a->map_len);
    if (a->pool != NULL) {
        a->pool->live--;
        a->pool->live_bytes -= a->size;
        a->pool->reserved -= a->footprint;
        if (a->pool->destroyed && a->pool->live == 0)
            free_pool(a->pool);
    }
    HASH_DEL(driver.allocs, a);
    free(a);
}

/* cuMemFreeAsync: the block stays in the pool while the pool's reserved
 * bytes are within its release threshold. */
static void cache_async(struct sim_alloc *a)
{
    struct CUmemPoolHandle_st *p = a->pool;
    HASH_DEL(driver.allocs, a);
    p->live--;
    p->live_bytes -= a->size;
    a->next_cached = p->cached;
    p->cached = a;
    if (p->destroyed && p->live == 0)
        free_pool(p);
    else
        trim_pool(p, p->release_threshold);
}

/* A cached block of p that holds `size` bytes, the smallest such; removed
 * from the cache.  NULL when none fits. */
static struct sim_alloc *reuse_cached(struct CUmemPoolHandle_st *p, uint64_t size)
{
    struct sim_alloc **best = NULL;
    for (struct sim_alloc **pa = &p->cached; *pa != NULL; pa = &(*pa)->next_cached)
        if ((*pa)->footprint >= size && (best == NULL || (*pa)->footprint < (*best)->footprint))
            best = pa;
    if (best == NULL)
        return NULL;
    struct sim_alloc *a = *best;
    *best = a->next_cached;
    a->next_cached = NULL;
    return a;
}

CUresult driver_memory_init_device(int d)
{
    driver.dev[d].default_pool = new_pool(d, 1, 0);
    return driver.dev[d].default_pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
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

/* With the lock held: places `size` bytes of device memory on dev and
 * records it.  CUDA_ERROR_OUT_OF_MEMORY when no placement fits. */
static CUresult new_device_alloc(int dev, uint64_t size, enum sim_alloc_kind kind,
                                 struct CUmemPoolHandle_st *pool, uint64_t *addr)
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
    a->pool = pool;
    if (pool != NULL) {
        a->footprint = footprint_of(&a->block);
        pool->live++;
        pool->live_bytes += size;
        pool->reserved += a->footprint;
        pool->reserved_high = max_u64(pool->reserved_high, pool->reserved);
        pool->used_high = max_u64(pool->used_high, pool->live_bytes);
    }
    record_alloc(a, size, kind, dev);
    *addr = a->addr;
    return CUDA_SUCCESS;
}

/* ---- linear memory ---- */

/* cuMemAlloc* and cuMemAllocPitch*: `size` already validated. */
static CUresult alloc_linear(uint64_t size, enum sim_alloc_kind kind, uint64_t *addr)
{
    int dev;
    driver_lock();
    CUresult r = driver_current_device(&dev);
    if (r == CUDA_SUCCESS)
        r = new_device_alloc(dev, size, kind, NULL, addr);
    driver_unlock();
    return r;
}

/* cuMemAlloc*: out_ok says the caller gave somewhere to store the pointer. */
static CUresult alloc_plain(int out_ok, uint64_t size, enum sim_alloc_kind kind, uint64_t *addr)
{
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && (!out_ok || size == 0))
        r = CUDA_ERROR_INVALID_VALUE;
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
DRIVER_SELF(cuMemAlloc_v2);

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
DRIVER_SELF(cuMemAlloc);

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
DRIVER_SELF(cuMemAllocPitch_v2);

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
DRIVER_SELF(cuMemAllocPitch);

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
        struct sim_alloc *a = find_alloc(dptr);
        if (a == NULL || a->kind == AK_HOST)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            release_alloc(a);
    }
    driver_unlock();
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    DRIVER_ENTER(cuMemFree_v2);
    return driver_leave(SYM_cuMemFree_v2, free_device_ptr(dptr), "(0x%llx)", dptr);
}
DRIVER_SELF(cuMemFree_v2);

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    DRIVER_ENTER(cuMemFree);
    return driver_leave(SYM_cuMemFree, free_device_ptr(dptr), "(0x%x)", dptr);
}
DRIVER_SELF(cuMemFree);

/* ---- what is free ---- */

/* free = capacity - pages held x 2 MiB - SIMCUDA_RESERVED (once charged)
 * - what other processes hold (SIMCUDA_SHARED): shared pages count whole,
 * as on a real GPU.  outs_ok: the caller gave both out pointers. */
static CUresult mem_info(int outs_ok, uint64_t *free_bytes, uint64_t *total)
{
    int dev;
    CUresult r = driver_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!outs_ok)
        return CUDA_ERROR_INVALID_VALUE;
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
DRIVER_SELF(cuMemGetInfo_v2);

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
DRIVER_SELF(cuMemGetInfo);

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
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && (dptr == NULL || bytesize == 0 ||
                              (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)))
        r = CUDA_ERROR_INVALID_VALUE;
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
DRIVER_SELF(cuMemAllocManaged);

static CUresult host_alloc(void **pp, uint64_t size, unsigned int flags)
{
    const unsigned int known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                               CU_MEMHOSTALLOC_WRITECOMBINED;
    int dev;
    CUresult r = driver_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (pp == NULL || size == 0 || (flags & ~known) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    driver_lock();
    r = driver_current_device(&dev);
    if (r == CUDA_SUCCESS)
        r = new_host_alloc(dev, size, AK_HOST, pp);
    driver_unlock();
    return r;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    DRIVER_ENTER(cuMemHostAlloc);
    CUresult r = host_alloc(pp, bytesize, Flags);
    return driver_leave(SYM_cuMemHostAlloc, r, "(%zu, 0x%x) -> %p", bytesize, Flags,
                        r == CUDA_SUCCESS ? *pp : NULL);
}
DRIVER_SELF(cuMemHostAlloc);

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    DRIVER_ENTER(cuMemAllocHost_v2);
    CUresult r = host_alloc(pp, bytesize, 0);
    return driver_leave(SYM_cuMemAllocHost_v2, r, "(%zu) -> %p", bytesize,
                        r == CUDA_SUCCESS ? *pp : NULL);
}
DRIVER_SELF(cuMemAllocHost_v2);

CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    DRIVER_ENTER(cuMemAllocHost);
    CUresult r = host_alloc(pp, bytesize, 0);
    return driver_leave(SYM_cuMemAllocHost, r, "(%u) -> %p", bytesize,
                        r == CUDA_SUCCESS ? *pp : NULL);
}
DRIVER_SELF(cuMemAllocHost);

CUresult cuMemFreeHost(void *p)
{
    DRIVER_ENTER(cuMemFreeHost);
    int dev;
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && p == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        driver_lock();
        r = driver_current_device(&dev);
        if (r == CUDA_SUCCESS) {
            struct sim_alloc *a = find_alloc((uint64_t)(uintptr_t)p);
            if (a == NULL || a->kind != AK_HOST)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                release_alloc(a);
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemFreeHost, r, "(%p)", p);
}
DRIVER_SELF(cuMemFreeHost);

/* ---- stream-ordered allocation (streams are opaque: any value works) ---- */

/* pool NULL: the default pool of the current context's device. */
static CUresult alloc_async(CUdeviceptr *dptr, uint64_t size, CUmemoryPool pool, uint64_t *addr)
{
    int dev;
    CUresult r = driver_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    driver_lock();
    r = driver_current_device(&dev);
    if (r == CUDA_SUCCESS && pool == NULL)
        pool = driver.dev[dev].default_pool;
    else if (r == CUDA_SUCCESS && !usable_pool(pool))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && pool->max_size != 0 && size > pool->max_size - pool->live_bytes)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_alloc *a = r == CUDA_SUCCESS ? reuse_cached(pool, size) : NULL;
    if (a != NULL) {
        a->size = size;
        pool->live++;
        pool->live_bytes += size;
        pool->used_high = max_u64(pool->used_high, pool->live_bytes);
        add_alloc(a);
        *addr = a->addr;
    } else if (r == CUDA_SUCCESS) {
        r = new_device_alloc(pool->device, size, AK_ASYNC, pool, addr);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && pool->cached != NULL) {
            trim_pool(pool, 0);
            r = new_device_alloc(pool->device, size, AK_ASYNC, pool, addr);
        }
    }
    driver_unlock();
    if (r == CUDA_SUCCESS)
        *dptr = *addr;
    return r;
}

static CUresult free_async(uint64_t dptr)
{
    int dev;
    CUresult r = driver_ready();
    if (r != CUDA_SUCCESS)
        return r;
    driver_lock();
    r = driver_current_device(&dev);
    if (r == CUDA_SUCCESS) {
        struct sim_alloc *a = find_alloc(dptr);
        if (a == NULL || a->kind != AK_ASYNC)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            cache_async(a);
    }
    driver_unlock();
    return r;
}

/* cuMemAllocFromPoolAsync*: a NULL pool is not "the default": NVIDIA
 * rejects it. */
static CUresult alloc_from_pool(CUdeviceptr *dptr, uint64_t size, CUmemoryPool pool,
                                uint64_t *addr)
{
    return pool == NULL ? CUDA_ERROR_INVALID_VALUE : alloc_async(dptr, size, pool, addr);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    DRIVER_ENTER(cuMemAllocAsync);
    uint64_t addr = 0;
    CUresult r = alloc_async(dptr, bytesize, NULL, &addr);
    return driver_leave(SYM_cuMemAllocAsync, r, "(%zu, %p) -> 0x%llx", bytesize,
                        (void *)hStream, (unsigned long long)addr);
}
DRIVER_SELF(cuMemAllocAsync);

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    DRIVER_ENTER(cuMemAllocAsync_ptsz);
    uint64_t addr = 0;
    CUresult r = alloc_async(dptr, bytesize, NULL, &addr);
    return driver_leave(SYM_cuMemAllocAsync_ptsz, r, "(%zu, %p) -> 0x%llx", bytesize,
                        (void *)hStream, (unsigned long long)addr);
}
DRIVER_SELF(cuMemAllocAsync_ptsz);

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    DRIVER_ENTER(cuMemAllocFromPoolAsync);
    uint64_t addr = 0;
    CUresult r = alloc_from_pool(dptr, bytesize, pool, &addr);
    return driver_leave(SYM_cuMemAllocFromPoolAsync, r, "(%zu, %p, %p) -> 0x%llx", bytesize,
                        (void *)pool, (void *)hStream, (unsigned long long)addr);
}
DRIVER_SELF(cuMemAllocFromPoolAsync);

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    DRIVER_ENTER(cuMemAllocFromPoolAsync_ptsz);
    uint64_t addr = 0;
    CUresult r = alloc_from_pool(dptr, bytesize, pool, &addr);
    return driver_leave(SYM_cuMemAllocFromPoolAsync_ptsz, r, "(%zu, %p, %p) -> 0x%llx",
                        bytesize, (void *)pool, (void *)hStream, (unsigned long long)addr);
}
DRIVER_SELF(cuMemAllocFromPoolAsync_ptsz);

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    DRIVER_ENTER(cuMemFreeAsync);
    return driver_leave(SYM_cuMemFreeAsync, free_async(dptr), "(0x%llx, %p)", dptr,
                        (void *)hStream);
}
DRIVER_SELF(cuMemFreeAsync);

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    DRIVER_ENTER(cuMemFreeAsync_ptsz);
    return driver_leave(SYM_cuMemFreeAsync_ptsz, free_async(dptr), "(0x%llx, %p)", dptr,
                        (void *)hStream);
}
DRIVER_SELF(cuMemFreeAsync_ptsz);

/* ---- pools ---- */

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    DRIVER_ENTER(cuMemPoolCreate);
    CUmemoryPool p = NULL;
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && (pool == NULL || poolProps == NULL ||
                              poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        switch (poolProps->location.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
            if (!driver_valid_device(poolProps->location.id))
                r = CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_MEM_LOCATION_TYPE_HOST:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
            r = CUDA_ERROR_NOT_SUPPORTED; /* valid on CUDA 12.6+, not simulated */
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
    }
    if (r == CUDA_SUCCESS) {
        driver_lock();
        p = new_pool(poolProps->location.id, 0, poolProps->maxSize);
        driver_unlock();
        if (p == NULL)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *pool = p;
    }
    return driver_leave(SYM_cuMemPoolCreate, r, "() -> %p", (void *)p);
}
DRIVER_SELF(cuMemPoolCreate);

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    DRIVER_ENTER(cuMemPoolDestroy);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS) {
        driver_lock();
        if (!usable_pool(pool) || pool->is_default)
            r = CUDA_ERROR_INVALID_VALUE;
        else if (pool->live == 0)
            free_pool(pool);
        else
            pool->destroyed = 1; /* freed with its last allocation */
        driver_unlock();
    }
    return driver_leave(SYM_cuMemPoolDestroy, r, "(%p)", (void *)pool);
}
DRIVER_SELF(cuMemPoolDestroy);

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    DRIVER_ENTER(cuMemPoolTrimTo);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS) {
        driver_lock();
        if (!usable_pool(pool))
            r = CUDA_ERROR_INVALID_VALUE;
        else
            trim_pool(pool, minBytesToKeep);
        driver_unlock();
    }
    return driver_leave(SYM_cuMemPoolTrimTo, r, "(%p, %zu)", (void *)pool, minBytesToKeep);
}
DRIVER_SELF(cuMemPoolTrimTo);

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    DRIVER_ENTER(cuDeviceGetDefaultMemPool);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS && pool_out == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (r == CUDA_SUCCESS && !driver_valid_device(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        *pool_out = driver.dev[dev].default_pool;
    return driver_leave(SYM_cuDeviceGetDefaultMemPool, r, "(%d) -> %p", dev,
                        r == CUDA_SUCCESS ? (void *)*pool_out : NULL);
}
DRIVER_SELF(cuDeviceGetDefaultMemPool);

/* The REUSE_* attribute attr of pool; NULL when attr is another. */
static int *reuse_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
    if (attr < CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ||
        attr > CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
        return NULL;
    return &pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
}

/* Values are cuuint64_t except the three REUSE_* ints.  Of the statistics
 * only the two high-water marks may be set, to 0: that resets them to the
 * current value. */
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    DRIVER_ENTER(cuMemPoolGetAttribute);
    CUresult r = driver_ready();
    uint64_t v = 0;
    int *reuse;
    if (r == CUDA_SUCCESS && value == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        driver_lock();
        if (!usable_pool(pool))
            r = CUDA_ERROR_INVALID_VALUE;
        else if ((reuse = reuse_attr(pool, attr)) != NULL)
            *(int *)value = *reuse;
        else {
            switch (attr) {
            case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = pool->release_threshold; break;
            case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = pool->reserved; break;
            case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = pool->reserved_high; break;
            case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = pool->live_bytes; break;
            case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = pool->used_high; break;
            default: r = CUDA_ERROR_INVALID_VALUE; break;
            }
            if (r == CUDA_SUCCESS)
                *(cuuint64_t *)value = v;
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemPoolGetAttribute, r, "(%p, %d) -> %llu", (void *)pool,
                        (int)attr, (unsigned long long)v);
}
DRIVER_SELF(cuMemPoolGetAttribute);

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    DRIVER_ENTER(cuMemPoolSetAttribute);
    CUresult r = driver_ready();
    int *reuse;
    if (r == CUDA_SUCCESS && value == NULL)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        driver_lock();
        if (!usable_pool(pool))
            r = CUDA_ERROR_INVALID_VALUE;
        else if ((reuse = reuse_attr(pool, attr)) != NULL)
            *reuse = *(const int *)value != 0;
        else if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
            pool->release_threshold = *(const cuuint64_t *)value;
            trim_pool(pool, pool->release_threshold);
        } else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH && *(const cuuint64_t *)value == 0)
            pool->reserved_high = pool->reserved;
        else if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH && *(const cuuint64_t *)value == 0)
            pool->used_high = pool->live_bytes;
        else
            r = CUDA_ERROR_INVALID_VALUE;
        driver_unlock();
    }
    return driver_leave(SYM_cuMemPoolSetAttribute, r, "(%p, %d)", (void *)pool, (int)attr);
}
DRIVER_SELF(cuMemPoolSetAttribute);

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
DRIVER_SELF(cuMemGetAddressRange_v2);
