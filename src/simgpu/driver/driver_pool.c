/* driver_pool.c - memory pools and stream-ordered allocation of the
 * simulated driver (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync,
 * cuMemPool*, cuDeviceGetDefaultMemPool).
 *
 * An async allocation is placed like linear memory (driver_memory.c) and
 * charged at once: the block is what the pool reserves for it, whole 2 MiB
 * pages from 1 MiB up, 512-byte units of a shared page below.
 * cuMemFreeAsync keeps the block in the pool for reuse by a later
 * allocation it fits (best fit), as long as the pool's reserved bytes stay
 * within its release threshold (default 0: given back at once; NVIDIA gives
 * it back at the next synchronisation, which on a device whose work
 * completes at once is the same).  cuMemPoolTrimTo releases cached blocks;
 * an allocation that does not fit releases the pool's cached blocks and
 * tries once more.  Pool attributes report reserved (blocks held) and used
 * (bytes asked for) memory.  A pool destroyed while allocations are live
 * stays until the last of them is freed, as documented.
 *
 * Allocations need a current context (CUDA_ERROR_INVALID_CONTEXT
 * otherwise); pools and the default pool only need cuInit.  A zero size is
 * CUDA_ERROR_INVALID_VALUE.  All functions take driver.lock.
 */
#include "driver_impl.h"

#include <stdlib.h>

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

/* Releases cached blocks of p until it reserves at most `keep` bytes. */
static void trim_pool(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    while (p->reserved > keep && p->cached != NULL) {
        struct sim_alloc *a = p->cached;
        p->cached = a->next_cached;
        driver_memory_release_block(a);
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

CUresult driver_pool_init_device(int d)
{
    driver.dev[d].default_pool = new_pool(d, 1, 0);
    return driver.dev[d].default_pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void driver_pool_drop(struct sim_alloc *a)
{
    a->pool->live--;
    a->pool->live_bytes -= a->size;
    a->pool->reserved -= a->footprint;
    if (a->pool->destroyed && a->pool->live == 0)
        free_pool(a->pool);
}

/* With the lock held: places `size` bytes of new device memory for pool
 * and charges the pool for its block. */
static CUresult place_in_pool(struct CUmemPoolHandle_st *pool, uint64_t size, uint64_t *addr)
{
    struct sim_alloc *a = NULL;
    CUresult r = driver_memory_place(pool->device, size, AK_ASYNC, &a);
    if (r != CUDA_SUCCESS)
        return r;
    a->pool = pool;
    a->footprint = footprint_of(&a->block);
    pool->live++;
    pool->live_bytes += size;
    pool->reserved += a->footprint;
    pool->reserved_high = max_u64(pool->reserved_high, pool->reserved);
    pool->used_high = max_u64(pool->used_high, pool->live_bytes);
    *addr = a->addr;
    return CUDA_SUCCESS;
}

/* ---- stream-ordered allocation (streams are opaque: any value works) ---- */

/* pool NULL: the default pool of the current context's device.  *dptr is
 * set only on success. */
static CUresult alloc_async(CUdeviceptr *dptr, uint64_t size, CUmemoryPool pool)
{
    int dev;
    uint64_t addr = 0;
    CUresult r = driver_ready_args(dptr == NULL || size == 0);
    if (r != CUDA_SUCCESS)
        return r;
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
        driver_memory_add(a);
        addr = a->addr;
    } else if (r == CUDA_SUCCESS) {
        r = place_in_pool(pool, size, &addr);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && pool->cached != NULL) {
            trim_pool(pool, 0);
            r = place_in_pool(pool, size, &addr);
        }
    }
    driver_unlock();
    if (r == CUDA_SUCCESS)
        *dptr = addr;
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
        struct sim_alloc *a = driver_memory_find(dptr);
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
static CUresult alloc_from_pool(CUdeviceptr *dptr, uint64_t size, CUmemoryPool pool)
{
    return pool == NULL ? CUDA_ERROR_INVALID_VALUE : alloc_async(dptr, size, pool);
}

/* Each legacy-stream / per-thread-stream (_ptsz) pair differs only in the
 * symbol it logs under; a failed allocation logs address 0. */
DRIVER_CALL(cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
            alloc_async(dptr, bytesize, NULL), "(%zu, %p) -> 0x%llx", bytesize,
            (void *)hStream, r == CUDA_SUCCESS ? *dptr : 0)
DRIVER_CALL(cuMemAllocAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
            alloc_async(dptr, bytesize, NULL), "(%zu, %p) -> 0x%llx", bytesize,
            (void *)hStream, r == CUDA_SUCCESS ? *dptr : 0)
DRIVER_CALL(cuMemAllocFromPoolAsync,
            (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
            alloc_from_pool(dptr, bytesize, pool), "(%zu, %p, %p) -> 0x%llx", bytesize,
            (void *)pool, (void *)hStream, r == CUDA_SUCCESS ? *dptr : 0)
DRIVER_CALL(cuMemAllocFromPoolAsync_ptsz,
            (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
            alloc_from_pool(dptr, bytesize, pool), "(%zu, %p, %p) -> 0x%llx", bytesize,
            (void *)pool, (void *)hStream, r == CUDA_SUCCESS ? *dptr : 0)
DRIVER_CALL(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), free_async(dptr), "(0x%llx, %p)",
            dptr, (void *)hStream)
DRIVER_CALL(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), free_async(dptr),
            "(0x%llx, %p)", dptr, (void *)hStream)

/* ---- pools ---- */

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    DRIVER_ENTER(cuMemPoolCreate);
    CUmemoryPool p = NULL;
    CUresult r = driver_ready_args(pool == NULL || poolProps == NULL ||
                                   poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED);
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

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    DRIVER_ENTER(cuDeviceGetDefaultMemPool);
    CUresult r = driver_ready_args(pool_out == NULL);
    if (r == CUDA_SUCCESS && !driver_valid_device(dev))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        *pool_out = driver.dev[dev].default_pool;
    return driver_leave(SYM_cuDeviceGetDefaultMemPool, r, "(%d) -> %p", dev,
                        r == CUDA_SUCCESS ? (void *)*pool_out : NULL);
}

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
    CUresult r = driver_ready_args(value == NULL);
    uint64_t v = 0;
    int *reuse;
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

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    DRIVER_ENTER(cuMemPoolSetAttribute);
    CUresult r = driver_ready_args(value == NULL);
    int *reuse;
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
