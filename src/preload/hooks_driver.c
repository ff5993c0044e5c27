/* hooks_driver.c - driver API wrappers: linear device memory, managed,
 * page-locked host memory, stream-ordered allocation, memory info, and the
 * cuGetProcAddress look-ups that hand our wrappers to every CUDA runtime.
 *
 * Each wrapper: find the real function, call it, tell the tracker, return the
 * real result unchanged.  The only result we ever make up is the out-of-memory
 * code when the opt-in CUMEMTRACE_LIMIT refuses a request.
 * When no driver is loaded at all, a wrapper answers as the API does without
 * one: CUDA_ERROR_NOT_INITIALIZED.
 */
#include "hooks.h"

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED

/* ---- symbol look-up ---- */

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                             cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    PFN(cuGetProcAddress_v2) real = REAL(cuGetProcAddress_v2);
    if (real == NULL)
        return NO_DRIVER;
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn != NULL)
        *pfn = resolve_substitute_proc(symbol, *pfn, cudaVersion, flags,
                                       HOW_PROCADDRESS);
    return r;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                          cuuint64_t flags)
{
    PFN(cuGetProcAddress) real = REAL(cuGetProcAddress);
    if (real == NULL)
        return NO_DRIVER;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn != NULL)
        *pfn = resolve_substitute_proc(symbol, *pfn, cudaVersion, flags,
                                       HOW_PROCADDRESS);
    return r;
}

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

/* ---- linear device memory ---- */

static bool begin(struct hook_alloc *c, unsigned slot, enum record_kind kind,
                  uint64_t requested)
{
    c->slot = slot;
    c->kind = kind;
    c->device = -1;
    c->requested = requested;
    return hooks_alloc_begin(c, false);
}

static CUresult end(struct hook_alloc *c, CUresult r, uintptr_t addr,
                    uint64_t size)
{
    hooks_alloc_end(c, r == CUDA_SUCCESS, r == CUDA_ERROR_OUT_OF_MEMORY, addr,
                    size, false);
    return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    PFN(cuMemAlloc_v2) real = REAL(cuMemAlloc_v2);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAlloc_v2, KIND_DEVICE, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize);
    return end(&c, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    PFN(cuMemAlloc) real = REAL(cuMemAlloc);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAlloc, KIND_DEVICE, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize);
    return end(&c, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                            size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    PFN(cuMemAllocPitch_v2) real = REAL(cuMemAllocPitch_v2);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAllocPitch_v2, KIND_DEVICE,
               (uint64_t)WidthInBytes * Height))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    bool ok = r == CUDA_SUCCESS;
    return end(&c, r, ok ? *dptr : 0, ok ? (uint64_t)*pPitch * Height : 0);
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                         unsigned int WidthInBytes, unsigned int Height,
                         unsigned int ElementSizeBytes)
{
    PFN(cuMemAllocPitch) real = REAL(cuMemAllocPitch);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAllocPitch, KIND_DEVICE,
               (uint64_t)WidthInBytes * Height))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    bool ok = r == CUDA_SUCCESS;
    return end(&c, r, ok ? *dptr : 0, ok ? (uint64_t)*pPitch * Height : 0);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                           unsigned int flags)
{
    PFN(cuMemAllocManaged) real = REAL(cuMemAllocManaged);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAllocManaged, KIND_MANAGED, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize, flags);
    return end(&c, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    PFN(cuMemFree_v2) real = REAL(cuMemFree_v2);
    if (real == NULL)
        return NO_DRIVER;
    struct hook_free f;
    hooks_free_begin(&f, dptr, KIND_DEVICE);
    CUresult r = real(dptr);
    hooks_free_end(&f, r == CUDA_SUCCESS);
    return r;
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    PFN(cuMemFree) real = REAL(cuMemFree);
    if (real == NULL)
        return NO_DRIVER;
    struct hook_free f;
    hooks_free_begin(&f, dptr, KIND_DEVICE);
    CUresult r = real(dptr);
    hooks_free_end(&f, r == CUDA_SUCCESS);
    return r;
}

/* ---- page-locked host memory ---- */

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    PFN(cuMemAllocHost_v2) real = REAL(cuMemAllocHost_v2);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    begin(&c, SLOT_cuMemAllocHost_v2, KIND_HOST_PINNED, bytesize);
    CUresult r = real(pp, bytesize);
    return end(&c, r, r == CUDA_SUCCESS ? (uintptr_t)*pp : 0, bytesize);
}

CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    PFN(cuMemAllocHost) real = REAL(cuMemAllocHost);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    begin(&c, SLOT_cuMemAllocHost, KIND_HOST_PINNED, bytesize);
    CUresult r = real(pp, bytesize);
    return end(&c, r, r == CUDA_SUCCESS ? (uintptr_t)*pp : 0, bytesize);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    PFN(cuMemHostAlloc) real = REAL(cuMemHostAlloc);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    begin(&c, SLOT_cuMemHostAlloc, KIND_HOST_PINNED, bytesize);
    CUresult r = real(pp, bytesize, Flags);
    return end(&c, r, r == CUDA_SUCCESS ? (uintptr_t)*pp : 0, bytesize);
}

CUresult cuMemFreeHost(void *p)
{
    PFN(cuMemFreeHost) real = REAL(cuMemFreeHost);
    if (real == NULL)
        return NO_DRIVER;
    struct hook_free f;
    hooks_free_begin(&f, (uintptr_t)p, KIND_HOST_PINNED);
    CUresult r = real(p);
    hooks_free_end(&f, r == CUDA_SUCCESS);
    return r;
}

/* ---- stream-ordered allocation ---- */

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    PFN(cuMemAllocAsync) real = REAL(cuMemAllocAsync);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAllocAsync, KIND_ASYNC, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize, hStream);
    return end(&c, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                              CUstream hStream)
{
    PFN(cuMemAllocAsync_ptsz) real = REAL(cuMemAllocAsync_ptsz);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAllocAsync_ptsz, KIND_ASYNC, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize, hStream);
    return end(&c, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                 CUmemoryPool pool, CUstream hStream)
{
    PFN(cuMemAllocFromPoolAsync) real = REAL(cuMemAllocFromPoolAsync);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAllocFromPoolAsync, KIND_ASYNC, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize, pool, hStream);
    return end(&c, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                      CUmemoryPool pool, CUstream hStream)
{
    PFN(cuMemAllocFromPoolAsync_ptsz) real = REAL(cuMemAllocFromPoolAsync_ptsz);
    struct hook_alloc c;
    if (real == NULL)
        return NO_DRIVER;
    if (!begin(&c, SLOT_cuMemAllocFromPoolAsync_ptsz, KIND_ASYNC, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(dptr, bytesize, pool, hStream);
    return end(&c, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize);
}

/* A stream-ordered free is accounted when issued (record.c, Limitations). */
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    PFN(cuMemFreeAsync) real = REAL(cuMemFreeAsync);
    if (real == NULL)
        return NO_DRIVER;
    struct hook_free f;
    hooks_free_begin(&f, dptr, KIND_DEVICE);
    CUresult r = real(dptr, hStream);
    hooks_free_end(&f, r == CUDA_SUCCESS);
    return r;
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    PFN(cuMemFreeAsync_ptsz) real = REAL(cuMemFreeAsync_ptsz);
    if (real == NULL)
        return NO_DRIVER;
    struct hook_free f;
    hooks_free_begin(&f, dptr, KIND_DEVICE);
    CUresult r = real(dptr, hStream);
    hooks_free_end(&f, r == CUDA_SUCCESS);
    return r;
}
