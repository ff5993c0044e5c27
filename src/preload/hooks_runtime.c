/* hooks_runtime.c - CUDA runtime API wrappers.
 *
 * The runtime wrappers are the outermost call when an application links
 * libcudart dynamically: they record the allocation with the entry point the
 * application called (cudaMalloc, not cuMemAlloc_v2), and the driver wrapper
 * the runtime reaches through our cuGetProcAddress passes through (hooks.h).
 * A program linked with the static runtime never reaches these; it is seen
 * at the driver wrappers instead.
 *
 * cudaGetDriverEntryPoint(ByVersion): the runtime asks the driver through
 * the cuGetProcAddress it obtained - normally our wrapper already - and we
 * post-process its answer as well, for runtimes that obtained the real one
 * before we could intervene.
 * With no runtime loaded a wrapper answers cudaErrorInsufficientDriver.
 */
#include "hooks.h"

#define NO_RUNTIME cudaErrorInsufficientDriver

static bool begin(struct hook_alloc *c, unsigned slot, enum record_kind kind,
                  uint64_t requested)
{
    c->slot = slot;
    c->kind = kind;
    c->device = -1;
    c->requested = requested;
    return hooks_alloc_begin(c, true);
}

static cudaError_t end(struct hook_alloc *c, cudaError_t r, const void *addr,
                       uint64_t size)
{
    hooks_alloc_end(c, r == cudaSuccess, r == cudaErrorMemoryAllocation,
                    (uintptr_t)addr, size, false);
    return r;
}

/* ---- device memory ---- */

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    PFN(cudaMalloc) real = REAL(cudaMalloc);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!begin(&c, SLOT_cudaMalloc, KIND_DEVICE, size))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(devPtr, size);
    return end(&c, r, r == cudaSuccess ? *devPtr : NULL, size);
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width,
                            size_t height)
{
    PFN(cudaMallocPitch) real = REAL(cudaMallocPitch);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!begin(&c, SLOT_cudaMallocPitch, KIND_DEVICE, (uint64_t)width * height))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(devPtr, pitch, width, height);
    bool ok = r == cudaSuccess;
    return end(&c, r, ok ? *devPtr : NULL, ok ? (uint64_t)*pitch * height : 0);
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr,
                         struct cudaExtent extent)
{
    PFN(cudaMalloc3D) real = REAL(cudaMalloc3D);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    uint64_t rows = (uint64_t)extent.height * extent.depth;
    if (!begin(&c, SLOT_cudaMalloc3D, KIND_DEVICE, extent.width * rows))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(pitchedDevPtr, extent);
    bool ok = r == cudaSuccess;
    return end(&c, r, ok ? pitchedDevPtr->ptr : NULL,
               ok ? pitchedDevPtr->pitch * rows : 0);
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    PFN(cudaMallocManaged) real = REAL(cudaMallocManaged);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!begin(&c, SLOT_cudaMallocManaged, KIND_MANAGED, size))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(devPtr, size, flags);
    return end(&c, r, r == cudaSuccess ? *devPtr : NULL, size);
}

cudaError_t cudaFree(void *devPtr)
{
    PFN(cudaFree) real = REAL(cudaFree);
    if (real == NULL)
        return NO_RUNTIME;
    struct hook_free f;
    hooks_free_begin(&f, (uintptr_t)devPtr, KIND_DEVICE);
    cudaError_t r = real(devPtr);
    hooks_free_end(&f, r == cudaSuccess);
    return r;
}

/* ---- page-locked host memory ---- */

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    PFN(cudaMallocHost) real = REAL(cudaMallocHost);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    begin(&c, SLOT_cudaMallocHost, KIND_HOST_PINNED, size);
    cudaError_t r = real(ptr, size);
    return end(&c, r, r == cudaSuccess ? *ptr : NULL, size);
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    PFN(cudaHostAlloc) real = REAL(cudaHostAlloc);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    begin(&c, SLOT_cudaHostAlloc, KIND_HOST_PINNED, size);
    cudaError_t r = real(pHost, size, flags);
    return end(&c, r, r == cudaSuccess ? *pHost : NULL, size);
}

cudaError_t cudaFreeHost(void *ptr)
{
    PFN(cudaFreeHost) real = REAL(cudaFreeHost);
    if (real == NULL)
        return NO_RUNTIME;
    struct hook_free f;
    hooks_free_begin(&f, (uintptr_t)ptr, KIND_HOST_PINNED);
    cudaError_t r = real(ptr);
    hooks_free_end(&f, r == cudaSuccess);
    return r;
}

/* ---- stream-ordered allocation ---- */

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    PFN(cudaMallocAsync) real = REAL(cudaMallocAsync);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!begin(&c, SLOT_cudaMallocAsync, KIND_ASYNC, size))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(devPtr, size, hStream);
    return end(&c, r, r == cudaSuccess ? *devPtr : NULL, size);
}

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size,
                                 cudaStream_t hStream)
{
    PFN(cudaMallocAsync_ptsz) real = REAL(cudaMallocAsync_ptsz);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!begin(&c, SLOT_cudaMallocAsync_ptsz, KIND_ASYNC, size))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(devPtr, size, hStream);
    return end(&c, r, r == cudaSuccess ? *devPtr : NULL, size);
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size,
                                    cudaMemPool_t memPool, cudaStream_t stream)
{
    PFN(cudaMallocFromPoolAsync) real = REAL(cudaMallocFromPoolAsync);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!begin(&c, SLOT_cudaMallocFromPoolAsync, KIND_ASYNC, size))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(ptr, size, memPool, stream);
    return end(&c, r, r == cudaSuccess ? *ptr : NULL, size);
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size,
                                         cudaMemPool_t memPool,
                                         cudaStream_t stream)
{
    PFN(cudaMallocFromPoolAsync_ptsz) real = REAL(cudaMallocFromPoolAsync_ptsz);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!begin(&c, SLOT_cudaMallocFromPoolAsync_ptsz, KIND_ASYNC, size))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(ptr, size, memPool, stream);
    return end(&c, r, r == cudaSuccess ? *ptr : NULL, size);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    PFN(cudaFreeAsync) real = REAL(cudaFreeAsync);
    if (real == NULL)
        return NO_RUNTIME;
    struct hook_free f;
    hooks_free_begin(&f, (uintptr_t)devPtr, KIND_DEVICE);
    cudaError_t r = real(devPtr, hStream);
    hooks_free_end(&f, r == cudaSuccess);
    return r;
}

cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    PFN(cudaFreeAsync_ptsz) real = REAL(cudaFreeAsync_ptsz);
    if (real == NULL)
        return NO_RUNTIME;
    struct hook_free f;
    hooks_free_begin(&f, (uintptr_t)devPtr, KIND_DEVICE);
    cudaError_t r = real(devPtr, hStream);
    hooks_free_end(&f, r == cudaSuccess);
    return r;
}

/* ---- memory info ---- */

cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    PFN(cudaMemGetInfo) real = REAL(cudaMemGetInfo);
    if (real == NULL)
        return NO_RUNTIME;
    cudaError_t r = real(free, total);
    if (hook_enter() && r == cudaSuccess)
        hooks_meminfo(hooks_runtime_device(), free, total);
    hook_leave();
    return r;
}

/* ---- driver entry points ---- */

static int runtime_version(void)
{
    PFN(cudaRuntimeGetVersion) get = REAL(cudaRuntimeGetVersion);
    int v;
    if (get != NULL && get(&v) == cudaSuccess && v > 0)
        return v;
    return 13000; /* the ABI this library was written against */
}

static cudaError_t entry_point_done(cudaError_t r, const char *symbol,
                                    void **funcPtr, int version,
                                    unsigned long long flags)
{
    if (r == cudaSuccess && funcPtr != NULL)
        *funcPtr = resolve_substitute_proc(symbol, *funcPtr, version, flags,
                                           HOW_ENTRYPOINT);
    return r;
}

cudaError_t cudaGetDriverEntryPoint(
    const char *symbol, void **funcPtr, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    PFN(cudaGetDriverEntryPoint) real = REAL(cudaGetDriverEntryPoint);
    if (real == NULL)
        return NO_RUNTIME;
    cudaError_t r = real(symbol, funcPtr, flags, driverStatus);
    return entry_point_done(r, symbol, funcPtr, runtime_version(), flags);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(
    const char *symbol, void **funcPtr, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    PFN(cudaGetDriverEntryPoint_ptsz) real = REAL(cudaGetDriverEntryPoint_ptsz);
    if (real == NULL)
        return NO_RUNTIME;
    cudaError_t r = real(symbol, funcPtr, flags, driverStatus);
    return entry_point_done(r, symbol, funcPtr, runtime_version(), flags);
}

cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion,
    unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    PFN(cudaGetDriverEntryPointByVersion) real =
        REAL(cudaGetDriverEntryPointByVersion);
    if (real == NULL)
        return NO_RUNTIME;
    cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    return entry_point_done(r, symbol, funcPtr, (int)cudaVersion, flags);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion,
    unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    PFN(cudaGetDriverEntryPointByVersion_ptsz) real =
        REAL(cudaGetDriverEntryPointByVersion_ptsz);
    if (real == NULL)
        return NO_RUNTIME;
    cudaError_t r = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
    return entry_point_done(r, symbol, funcPtr, (int)cudaVersion, flags);
}
