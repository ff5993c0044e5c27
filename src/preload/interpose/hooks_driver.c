/* hooks_driver.c - driver API wrappers: linear device memory, managed,
 * page-locked host memory, stream-ordered allocation and memory info (the
 * cuGetProcAddress look-ups that hand our wrappers to every CUDA runtime are
 * in hooks_lookup.c).
 *
 * Each wrapper: find the real function, call it, tell the tracker, return the
 * real result unchanged.  The only result we ever make up is the out-of-memory
 * code when the opt-in CUMEMTRACE_LIMIT refuses a request.
 * When no driver is loaded at all, a wrapper answers as the API does without
 * one: CUDA_ERROR_NOT_INITIALIZED.
 */
#include "hooks_fast.h"

#include "clock.h"

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED

/* ---- memory info ---- */

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    PFN(cuMemGetInfo_v2) real = REAL(cuMemGetInfo_v2);
    if (real == NULL)
        return NO_DRIVER;
    CUresult r = real(free, total);
    if (hook_enter() && r == CUDA_SUCCESS)
        hooks_meminfo(hooks_driver_device(), free, total);
    hook_leave();
    return r;
}

CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    PFN(cuMemGetInfo) real = REAL(cuMemGetInfo);
    if (real == NULL)
        return NO_DRIVER;
    CUresult r = real(free, total);
    if (hook_enter() && r == CUDA_SUCCESS) {
        size_t f = free ? *free : 0, t = total ? *total : 0;
        hooks_meminfo(hooks_driver_device(), free ? &f : NULL,
                      total ? &t : NULL);
        if (free)
            *free = (unsigned int)f;
        if (total)
            *total = (unsigned int)t;
    }
    hook_leave();
    return r;
}

/* ---- allocations and frees ---- */

#define DRIVER_ALLOC(...) \
    HOOK_ALLOC(CUresult, NO_DRIVER, CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, \
               false, __VA_ARGS__)
#define DRIVER_FREE(...) HOOK_FREE(CUresult, NO_DRIVER, CUDA_SUCCESS, __VA_ARGS__)
/* An entry point and its per-thread-default-stream twin sym_ptsz: one ABI */
#define DRIVER_ALLOC_PTSZ(sym, ...) \
    DRIVER_ALLOC(sym, __VA_ARGS__) DRIVER_ALLOC(sym##_ptsz, __VA_ARGS__)
#define DRIVER_FREE_PTSZ(sym, ...) \
    DRIVER_FREE(sym, __VA_ARGS__) DRIVER_FREE(sym##_ptsz, __VA_ARGS__)

/* linear device memory */
DRIVER_ALLOC(cuMemAlloc_v2, KIND_DEVICE, bytesize, dptr,
             (CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize))
DRIVER_ALLOC(cuMemAlloc, KIND_DEVICE, bytesize, dptr,
             (CUdeviceptr_v1 *dptr, unsigned int bytesize), (dptr, bytesize))
DRIVER_ALLOC(cuMemAllocManaged, KIND_MANAGED, bytesize, dptr,
             (CUdeviceptr *dptr, size_t bytesize, unsigned int flags),
             (dptr, bytesize, flags))
DRIVER_FREE(cuMemFree_v2, KIND_DEVICE, dptr, (CUdeviceptr dptr), (dptr))
DRIVER_FREE(cuMemFree, KIND_DEVICE, dptr, (CUdeviceptr_v1 dptr), (dptr))

/* page-locked host memory (CUMEMTRACE_LIMIT does not apply to it) */
DRIVER_ALLOC(cuMemAllocHost_v2, KIND_HOST_PINNED, bytesize, pp,
             (void **pp, size_t bytesize), (pp, bytesize))
DRIVER_ALLOC(cuMemAllocHost, KIND_HOST_PINNED, bytesize, pp,
             (void **pp, unsigned int bytesize), (pp, bytesize))
DRIVER_ALLOC(cuMemHostAlloc, KIND_HOST_PINNED, bytesize, pp,
             (void **pp, size_t bytesize, unsigned int Flags),
             (pp, bytesize, Flags))
DRIVER_FREE(cuMemFreeHost, KIND_HOST_PINNED, p, (void *p), (p))

/* stream-ordered allocation; a free is accounted when it is issued
 * (record.c, Limitations) */
DRIVER_ALLOC_PTSZ(cuMemAllocAsync, KIND_ASYNC, bytesize, dptr,
                  (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
                  (dptr, bytesize, hStream))
DRIVER_ALLOC_PTSZ(cuMemAllocFromPoolAsync, KIND_ASYNC, bytesize, dptr,
                  (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                  (dptr, bytesize, pool, hStream))
DRIVER_FREE_PTSZ(cuMemFreeAsync, KIND_DEVICE, dptr,
                 (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))

/* Pitched allocations charge pitch * height, known only after the call.
 * The v1 and _v2 ABIs differ only in the width of their types. */
#define DRIVER_PITCH(sym, ptr_t, dim_t)                                        \
    CUresult sym(ptr_t *dptr, dim_t *pPitch, dim_t WidthInBytes, dim_t Height, \
                 unsigned int ElementSizeBytes)                                \
    {                                                                          \
        PFN(sym) real = REAL(sym);                                             \
        if (real == NULL)                                                      \
            return NO_DRIVER;                                                  \
        struct hook_alloc c = {SLOT_##sym, KIND_DEVICE, -1,                    \
                               (uint64_t)WidthInBytes * Height, false, false, false, \
                               {0}, HOOK_FRAME()};                            \
        if (!hooks_alloc_begin(&c, false))                                     \
            return CUDA_ERROR_OUT_OF_MEMORY;                                   \
        CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); \
        bool ok = r == CUDA_SUCCESS;                                           \
        hooks_alloc_end(&c, ok, r == CUDA_ERROR_OUT_OF_MEMORY, ok ? *dptr : 0, \
                        ok ? (uint64_t)*pPitch * Height : 0, false);           \
        return r;                                                              \
    }

DRIVER_PITCH(cuMemAllocPitch_v2, CUdeviceptr, size_t)
DRIVER_PITCH(cuMemAllocPitch, CUdeviceptr_v1, unsigned int)
