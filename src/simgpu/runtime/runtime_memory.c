/* runtime_memory.c - the simulated runtime's memory calls: each makes the
 * thread's device current, then calls, through runtime_drv, the driver
 * function NVIDIA's runtime calls (cudaMallocHost and cudaHostAlloc reach
 * cuMemHostAlloc: NVIDIA's runtime never looks up cuMemAllocHost; the _ptsz
 * forms the look-ups with flags 2).  As NVIDIA's runtime: cudaMalloc of 0
 * bytes succeeds with NULL without calling the driver, and cudaFree(NULL) /
 * cudaFreeHost(NULL) only initialise.
 */
#include "runtime.h"

#include <stdint.h>

/* Pitched allocations ask for the widest element the hardware coalesces, so
 * the driver's pitch suits any element type. */
#define PITCH_ELEMENT 16

static void *as_ptr(CUdeviceptr d)
{
    return (void *)(uintptr_t)d;
}

static CUdeviceptr as_dptr(const void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    RUNTIME_ENTER(cudaMalloc);
    CUdeviceptr d = 0;
    cudaError_t e = devPtr == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess && size == 0)
        *devPtr = NULL;
    else if (e == cudaSuccess &&
             (e = RUNTIME_DRIVER(runtime_drv.cuMemAlloc_v2, (&d, size))) == cudaSuccess)
        *devPtr = as_ptr(d);
    return runtime_leave(RSYM_cudaMalloc, e, "(%zu) -> 0x%llx", size, d);
}

/* cudaMallocPitch and cudaMalloc3D: rows of `width` bytes. */
static cudaError_t alloc_pitched(void **ptr, size_t *pitch, size_t width, size_t rows)
{
    CUdeviceptr d = 0;
    cudaError_t e = runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuMemAllocPitch_v2, (&d, pitch, width, rows, PITCH_ELEMENT));
    if (e == cudaSuccess)
        *ptr = as_ptr(d);
    return e;
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    RUNTIME_ENTER(cudaMallocPitch);
    cudaError_t e = cudaErrorInvalidValue;
    if (devPtr != NULL && pitch != NULL)
        e = alloc_pitched(devPtr, pitch, width, height);
    return runtime_leave(RSYM_cudaMallocPitch, e, "(%zu, %zu) -> %p", width, height,
                         e == cudaSuccess ? *devPtr : NULL);
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    RUNTIME_ENTER(cudaMalloc3D);
    cudaError_t e = cudaErrorInvalidValue;
    void *p = NULL;
    size_t pitch = 0;
    if (pitchedDevPtr != NULL &&
        (extent.depth == 0 || extent.height <= SIZE_MAX / extent.depth))
        e = alloc_pitched(&p, &pitch, extent.width, extent.height * extent.depth);
    if (e == cudaSuccess) {
        pitchedDevPtr->ptr = p;
        pitchedDevPtr->pitch = pitch;
        pitchedDevPtr->xsize = extent.width;
        pitchedDevPtr->ysize = extent.height;
    }
    return runtime_leave(RSYM_cudaMalloc3D, e, "(%zu, %zu, %zu) -> %p pitch %zu", extent.width,
                         extent.height, extent.depth, p, pitch);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    RUNTIME_ENTER(cudaMallocManaged);
    CUdeviceptr d = 0;
    cudaError_t e = devPtr == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuMemAllocManaged, (&d, size, flags));
    if (e == cudaSuccess)
        *devPtr = as_ptr(d);
    return runtime_leave(RSYM_cudaMallocManaged, e, "(%zu, %u) -> 0x%llx", size, flags, d);
}

static cudaError_t host_alloc(void **p, size_t size, unsigned int flags)
{
    cudaError_t e = p == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess) /* cudaHostAlloc* flags have the cuMemHostAlloc values */
        e = RUNTIME_DRIVER(runtime_drv.cuMemHostAlloc, (p, size, flags));
    if (e == cudaSuccess)
        runtime_pinned_add(*p, size);
    return e;
}

RUNTIME_CALL(cudaMallocHost, (void **ptr, size_t size), host_alloc(ptr, size, 0), "(%zu) -> %p",
             size, e == cudaSuccess ? *ptr : NULL)
RUNTIME_CALL(cudaHostAlloc, (void **pHost, size_t size, unsigned int flags),
             host_alloc(pHost, size, flags), "(%zu, 0x%x) -> %p", size, flags,
             e == cudaSuccess ? *pHost : NULL)

cudaError_t cudaFreeHost(void *ptr)
{
    RUNTIME_ENTER(cudaFreeHost);
    cudaError_t e = runtime_context();
    if (e == cudaSuccess && ptr != NULL)
        e = RUNTIME_DRIVER(runtime_drv.cuMemFreeHost, (ptr));
    if (e == cudaSuccess && ptr != NULL)
        runtime_pinned_remove(ptr);
    return runtime_leave(RSYM_cudaFreeHost, e, "(%p)", ptr);
}

cudaError_t cudaFree(void *devPtr)
{
    RUNTIME_ENTER(cudaFree);
    cudaError_t e = runtime_context();
    if (e == cudaSuccess && devPtr != NULL)
        e = RUNTIME_DRIVER(runtime_drv.cuMemFree_v2, (as_dptr(devPtr)));
    return runtime_leave(RSYM_cudaFree, e, "(%p)", devPtr);
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    RUNTIME_ENTER(cudaMemGetInfo);
    cudaError_t e = free == NULL || total == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuMemGetInfo_v2, (free, total));
    return runtime_leave(RSYM_cudaMemGetInfo, e, "() -> %zu of %zu",
                         e == cudaSuccess ? *free : 0, e == cudaSuccess ? *total : 0);
}

/* ---- stream-ordered ---- */

/* fn is the flags-0 or the flags-2 (_ptsz) look-up. */
static cudaError_t alloc_async(__typeof__(cuMemAllocAsync) *fn, void **devPtr, size_t size,
                               cudaStream_t stream)
{
    CUdeviceptr d = 0;
    cudaError_t e = devPtr == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(fn, (&d, size, stream));
    if (e == cudaSuccess)
        *devPtr = as_ptr(d);
    return e;
}

static cudaError_t alloc_from_pool(__typeof__(cuMemAllocFromPoolAsync) *fn, void **ptr,
                                   size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    CUdeviceptr d = 0;
    cudaError_t e = ptr == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(fn, (&d, size, pool, stream));
    if (e == cudaSuccess)
        *ptr = as_ptr(d);
    return e;
}

static cudaError_t free_async(__typeof__(cuMemFreeAsync) *fn, void *devPtr, cudaStream_t stream)
{
    cudaError_t e = runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(fn, (as_dptr(devPtr), stream));
    return e;
}

RUNTIME_CALL(cudaMallocAsync, (void **devPtr, size_t size, cudaStream_t hStream),
             alloc_async(runtime_drv.cuMemAllocAsync, devPtr, size, hStream), "(%zu, %p) -> %p",
             size, (void *)hStream, e == cudaSuccess ? *devPtr : NULL)
RUNTIME_CALL(cudaMallocAsync_ptsz, (void **devPtr, size_t size, cudaStream_t hStream),
             alloc_async(runtime_drv.cuMemAllocAsync_ptsz, devPtr, size, hStream),
             "(%zu, %p) -> %p", size, (void *)hStream, e == cudaSuccess ? *devPtr : NULL)
RUNTIME_CALL(cudaMallocFromPoolAsync,
             (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
             alloc_from_pool(runtime_drv.cuMemAllocFromPoolAsync, ptr, size, memPool, stream),
             "(%zu, %p, %p) -> %p", size, (void *)memPool, (void *)stream,
             e == cudaSuccess ? *ptr : NULL)
RUNTIME_CALL(cudaMallocFromPoolAsync_ptsz,
             (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
             alloc_from_pool(runtime_drv.cuMemAllocFromPoolAsync_ptsz, ptr, size, memPool, stream),
             "(%zu, %p, %p) -> %p", size, (void *)memPool, (void *)stream,
             e == cudaSuccess ? *ptr : NULL)
RUNTIME_CALL(cudaFreeAsync, (void *devPtr, cudaStream_t hStream),
             free_async(runtime_drv.cuMemFreeAsync, devPtr, hStream), "(%p, %p)", devPtr,
             (void *)hStream)
RUNTIME_CALL(cudaFreeAsync_ptsz, (void *devPtr, cudaStream_t hStream),
             free_async(runtime_drv.cuMemFreeAsync_ptsz, devPtr, hStream), "(%p, %p)", devPtr,
             (void *)hStream)

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    RUNTIME_ENTER(cudaDeviceGetDefaultMemPool);
    cudaError_t e = memPool == NULL ? cudaErrorInvalidValue : runtime_check_device(device);
    if (e == cudaSuccess) /* the sim's CUdevice is the ordinal, as NVIDIA's */
        e = RUNTIME_DRIVER(runtime_drv.cuDeviceGetDefaultMemPool, (memPool, device));
    return runtime_leave(RSYM_cudaDeviceGetDefaultMemPool, e, "(%d) -> %p", device,
                         e == cudaSuccess ? (void *)*memPool : NULL);
}

/* ---- pool attributes: the runtime's numbering is the driver's ---- */

RUNTIME_CALL(cudaMemPoolGetAttribute,
             (cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value),
             RUNTIME_READY_DRIVER(runtime_drv.cuMemPoolGetAttribute,
                                  (memPool, (CUmemPool_attribute)attr, value)),
             "(%p, %d)", (void *)memPool, (int)attr)
RUNTIME_CALL(cudaMemPoolSetAttribute,
             (cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value),
             RUNTIME_READY_DRIVER(runtime_drv.cuMemPoolSetAttribute,
                                  (memPool, (CUmemPool_attribute)attr, value)),
             "(%p, %d)", (void *)memPool, (int)attr)
RUNTIME_CALL(cudaMemPoolTrimTo, (cudaMemPool_t memPool, size_t minBytesToKeep),
             RUNTIME_READY_DRIVER(runtime_drv.cuMemPoolTrimTo, (memPool, minBytesToKeep)),
             "(%p, %zu)", (void *)memPool, minBytesToKeep)

/* Every simulated device already reaches every pool. */
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc *descList,
                                 size_t count)
{
    RUNTIME_ENTER(cudaMemPoolSetAccess);
    cudaError_t e = descList == NULL && count > 0 ? cudaErrorInvalidValue : runtime_ready();
    for (size_t i = 0; i < count && e == cudaSuccess; i++)
        if (descList[i].location.type != cudaMemLocationTypeDevice ||
            !runtime_valid_device(descList[i].location.id))
            e = cudaErrorInvalidValue;
    return runtime_leave(RSYM_cudaMemPoolSetAccess, e, "(%p, %zu)", (void *)memPool, count);
}
