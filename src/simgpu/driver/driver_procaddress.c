/* driver_procaddress.c - cuGetProcAddress: base name + CUDA version + flags
 * to the exported variant with the matching ABI.
 *
 * As NVIDIA documents it: a caller asks for a base name ("cuMemAlloc") and
 * the CUDA version its code was written for; the driver returns the newest
 * variant introduced at or before that version (3020 and later get
 * cuMemAlloc_v2, earlier versions the 32-bit cuMemAlloc).  With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM a _ptsz variant is preferred
 * where one exists.  The returned function is the library's own definition
 * of the exported symbol, whatever an LD_PRELOAD interposes (NVIDIA's driver
 * returns its own functions too): the Makefile links the library with
 * -Bsymbolic-functions, which binds &sym here to this library.
 *
 * Outcomes: unknown name -> CUDA_ERROR_NOT_FOUND + SYMBOL_NOT_FOUND; known
 * name, every variant newer than the version -> CUDA_ERROR_NOT_FOUND +
 * VERSION_NOT_SUFFICIENT; NULL symbol or pfn, unknown flag bits, or a
 * version above the driver's (13000, documented) -> CUDA_ERROR_INVALID_VALUE
 * with symbolStatus untouched.  Works before cuInit, as NVIDIA's does.
 */
#include "driver_impl.h"

#include <string.h>

struct proc_entry {
    const char *base; /* the name callers ask for */
    void *fn;         /* the variant's function */
    int version;      /* first CUDA version that binds base to this variant */
    int ptsz;         /* per-thread-default-stream variant */
};

#define ENTRY(base, sym, version, ptsz) {#base, (void *)sym, version, ptsz}

static const struct proc_entry entries[] = {
    ENTRY(cuInit, cuInit, 2000, 0),
    ENTRY(cuDriverGetVersion, cuDriverGetVersion, 2020, 0),
    ENTRY(cuGetProcAddress, cuGetProcAddress, 11030, 0),
    ENTRY(cuGetProcAddress, cuGetProcAddress_v2, 12000, 0),
    ENTRY(cuGetErrorString, cuGetErrorString, 6000, 0),
    ENTRY(cuGetErrorName, cuGetErrorName, 6000, 0),
    ENTRY(cuDeviceGet, cuDeviceGet, 2000, 0),
    ENTRY(cuDeviceGetCount, cuDeviceGetCount, 2000, 0),
    ENTRY(cuDeviceGetName, cuDeviceGetName, 2000, 0),
    ENTRY(cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0),
    ENTRY(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020, 0),
    ENTRY(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0),
    ENTRY(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0),
    ENTRY(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0),
    ENTRY(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000, 0),
    ENTRY(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0),
    ENTRY(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000, 0),
    ENTRY(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, 0),
    ENTRY(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags, 7000, 0),
    ENTRY(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2, 11000, 0),
    ENTRY(cuCtxCreate, cuCtxCreate_v2, 3020, 0),
    ENTRY(cuCtxCreate, cuCtxCreate_v3, 11040, 0),
    ENTRY(cuCtxCreate, cuCtxCreate_v4, 12050, 0),
    ENTRY(cuCtxDestroy, cuCtxDestroy_v2, 4000, 0),
    ENTRY(cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0),
    ENTRY(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0),
    ENTRY(cuCtxGetDevice, cuCtxGetDevice, 2000, 0),
    ENTRY(cuCtxGetDevice, cuCtxGetDevice_v2, 13000, 0),
    ENTRY(cuCtxSynchronize, cuCtxSynchronize, 2000, 0),
    ENTRY(cuCtxSynchronize, cuCtxSynchronize_v2, 13000, 0),
    ENTRY(cuMemGetInfo, cuMemGetInfo, 2000, 0),
    ENTRY(cuMemGetInfo, cuMemGetInfo_v2, 3020, 0),
    ENTRY(cuMemAlloc, cuMemAlloc, 2000, 0),
    ENTRY(cuMemAlloc, cuMemAlloc_v2, 3020, 0),
    ENTRY(cuMemAllocPitch, cuMemAllocPitch, 2000, 0),
    ENTRY(cuMemAllocPitch, cuMemAllocPitch_v2, 3020, 0),
    ENTRY(cuMemFree, cuMemFree, 2000, 0),
    ENTRY(cuMemFree, cuMemFree_v2, 3020, 0),
    ENTRY(cuMemAllocManaged, cuMemAllocManaged, 6000, 0),
    ENTRY(cuMemAllocHost, cuMemAllocHost, 2000, 0),
    ENTRY(cuMemAllocHost, cuMemAllocHost_v2, 3020, 0),
    ENTRY(cuMemHostAlloc, cuMemHostAlloc, 2020, 0),
    ENTRY(cuMemFreeHost, cuMemFreeHost, 2000, 0),
    ENTRY(cuMemAllocAsync, cuMemAllocAsync, 11020, 0),
    ENTRY(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020, 1),
    ENTRY(cuMemFreeAsync, cuMemFreeAsync, 11020, 0),
    ENTRY(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020, 1),
    ENTRY(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0),
    ENTRY(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020, 1),
    ENTRY(cuMemPoolCreate, cuMemPoolCreate, 11020, 0),
    ENTRY(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0),
    ENTRY(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0),
    ENTRY(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0),
    ENTRY(cuMemAddressReserve, cuMemAddressReserve, 10020, 0),
    ENTRY(cuMemAddressFree, cuMemAddressFree, 10020, 0),
    ENTRY(cuMemCreate, cuMemCreate, 10020, 0),
    ENTRY(cuMemRelease, cuMemRelease, 10020, 0),
    ENTRY(cuMemMap, cuMemMap, 10020, 0),
    ENTRY(cuMemUnmap, cuMemUnmap, 10020, 0),
    ENTRY(cuMemSetAccess, cuMemSetAccess, 10020, 0),
    ENTRY(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020, 0),
    ENTRY(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0),
    ENTRY(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0),
    ENTRY(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, 0),
    ENTRY(cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle,
          10020, 0),
    ENTRY(cuMemExportToShareableHandle, cuMemExportToShareableHandle, 10020, 0),
    ENTRY(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 10020, 0),
    /* The v1 ABIs of these four are not simulated: their _v2 answers from
     * the first version that has the name (the signatures are the same). */
    ENTRY(cuDeviceGetUuid, cuDeviceGetUuid_v2, 9020, 0),
    ENTRY(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000, 0),
    ENTRY(cuCtxPopCurrent, cuCtxPopCurrent_v2, 4000, 0),
    ENTRY(cuStreamWriteValue32, cuStreamWriteValue32_v2, 8000, 0),
    ENTRY(cuMemGetAddressRange, cuMemGetAddressRange_v2, 3020, 0),
    ENTRY(cuMemsetD32Async, cuMemsetD32Async, 3020, 0),
};

CUresult driver_procaddress_lookup(const char *symbol, void **pfn, int cudaVersion,
                                   cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known_flags =
        CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if ((flags & ~known_flags) != 0 || cudaVersion > SIM_DRIVER_VERSION)
        return CUDA_ERROR_INVALID_VALUE;

    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct proc_entry *legacy = NULL, *ptsz = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        const struct proc_entry *e = &entries[i];
        if (strcmp(e->base, symbol) != 0)
            continue;
        known = 1;
        if (e->version > cudaVersion)
            continue;
        if (e->ptsz) {
            if (per_thread && (ptsz == NULL || e->version > ptsz->version))
                ptsz = e;
        } else if (legacy == NULL || e->version > legacy->version) {
            legacy = e;
        }
    }
    const struct proc_entry *best = ptsz ? ptsz : legacy;
    if (best == NULL) {
        *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                        : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->fn;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}
