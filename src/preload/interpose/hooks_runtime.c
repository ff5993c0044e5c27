/* hooks_runtime.c - CUDA runtime API wrappers.
 *
 * The runtime wrappers are the outermost call when an application links
 * libcudart dynamically: they record the allocation with the entry point the
 * application called (cudaMalloc, not cuMemAlloc_v2), and the driver wrapper
 * the runtime reaches through our cuGetProcAddress passes through (hooks.h).
 * A program linked with the static runtime never reaches these; it is seen
 * at the driver wrappers instead.
 *
 * cudaGetDriverEntryPoint(ByVersion) is in hooks_lookup.c.
 * With no runtime loaded a wrapper answers cudaErrorInsufficientDriver.
 */
#define HOOK_FAST_INLINE /* see hooks.h */
#include "hooks_fast.h"

#define NO_RUNTIME cudaErrorInsufficientDriver

#define RUNTIME_ALLOC(...)                                                 \
    HOOK_ALLOC(cudaError_t, NO_RUNTIME, cudaSuccess,                       \
               cudaErrorMemoryAllocation, true, __VA_ARGS__)
#define RUNTIME_FREE(...) HOOK_FREE(cudaError_t, NO_RUNTIME, cudaSuccess, __VA_ARGS__)
/* An entry point and its per-thread-default-stream twin sym_ptsz: one ABI */
#define RUNTIME_ALLOC_PTSZ(sym, ...) \
    RUNTIME_ALLOC(sym, __VA_ARGS__) RUNTIME_ALLOC(sym##_ptsz, __VA_ARGS__)
#define RUNTIME_FREE_PTSZ(sym, ...) \
    RUNTIME_FREE(sym, __VA_ARGS__) RUNTIME_FREE(sym##_ptsz, __VA_ARGS__)

/* ---- device and managed memory ---- */

RUNTIME_ALLOC(cudaMalloc, KIND_DEVICE, size, devPtr,
              (void **devPtr, size_t size), (devPtr, size))
RUNTIME_ALLOC(cudaMallocManaged, KIND_MANAGED, size, devPtr,
              (void **devPtr, size_t size, unsigned int flags),
              (devPtr, size, flags))
RUNTIME_FREE(cudaFree, KIND_DEVICE, devPtr, (void *devPtr), (devPtr))

/* Pitched allocations charge pitch * rows, known only after the call. */
static bool pitched_begin(struct hook_alloc *c, unsigned slot,
                          uint64_t requested, const void *frame)
{
    *c = (struct hook_alloc){slot, KIND_DEVICE, -1, requested, false, false, true,
                             {0}, frame};
    return hooks_alloc_begin(c, true);
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width,
                            size_t height)
{
    PFN(cudaMallocPitch) real = REAL(cudaMallocPitch);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    if (!pitched_begin(&c, SLOT_cudaMallocPitch, (uint64_t)width * height, HOOK_FRAME()))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(devPtr, pitch, width, height);
    bool ok = r == cudaSuccess;
    hooks_alloc_end(&c, ok, r == cudaErrorMemoryAllocation,
                    ok ? (uintptr_t)*devPtr : 0, ok ? (uint64_t)*pitch * height : 0,
                    false);
    return r;
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr,
                         struct cudaExtent extent)
{
    PFN(cudaMalloc3D) real = REAL(cudaMalloc3D);
    struct hook_alloc c;
    if (real == NULL)
        return NO_RUNTIME;
    uint64_t rows = (uint64_t)extent.height * extent.depth;
    if (!pitched_begin(&c, SLOT_cudaMalloc3D, extent.width * rows, HOOK_FRAME()))
        return cudaErrorMemoryAllocation;
    cudaError_t r = real(pitchedDevPtr, extent);
    bool ok = r == cudaSuccess;
    hooks_alloc_end(&c, ok, r == cudaErrorMemoryAllocation,
                    ok ? (uintptr_t)pitchedDevPtr->ptr : 0,
                    ok ? pitchedDevPtr->pitch * rows : 0, false);
    return r;
}

/* ---- page-locked host memory (CUMEMTRACE_LIMIT does not apply) ---- */

RUNTIME_ALLOC(cudaMallocHost, KIND_HOST_PINNED, size, ptr,
              (void **ptr, size_t size), (ptr, size))
RUNTIME_ALLOC(cudaHostAlloc, KIND_HOST_PINNED, size, pHost,
              (void **pHost, size_t size, unsigned int flags),
              (pHost, size, flags))
RUNTIME_FREE(cudaFreeHost, KIND_HOST_PINNED, ptr, (void *ptr), (ptr))

/* ---- stream-ordered allocation ---- */

RUNTIME_ALLOC_PTSZ(cudaMallocAsync, KIND_ASYNC, size, devPtr,
                   (void **devPtr, size_t size, cudaStream_t hStream), (devPtr, size, hStream))
RUNTIME_ALLOC_PTSZ(cudaMallocFromPoolAsync, KIND_ASYNC, size, ptr,
                   (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
                   (ptr, size, memPool, stream))
RUNTIME_FREE_PTSZ(cudaFreeAsync, KIND_DEVICE, devPtr,
                  (void *devPtr, cudaStream_t hStream), (devPtr, hStream))

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
