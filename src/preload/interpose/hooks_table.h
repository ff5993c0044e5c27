/* hooks_table.h - every CUDA entry point cumemtrace interposes, in one list.
 *
 * X(symbol, base name, first CUDA version, per-thread-stream variant)
 * The base name and version say what cuGetProcAddress(base, version, flags)
 * returns: the newest variant whose version <= the requested one, the _ptsz
 * variant when CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM is asked for
 * and one exists.  Versions are those NVIDIA's headers and the real runtime's
 * look-ups give (tests/data/cudart-13.0-getprocaddress.tsv).
 *
 * H(...) lists functions we call but do not wrap (resolved the same ways).
 */
#ifndef CUMEMTRACE_HOOKS_TABLE_H
#define CUMEMTRACE_HOOKS_TABLE_H

#define CUMEMTRACE_DRIVER_HOOKS(X)                                        \
    X(cuGetProcAddress, "cuGetProcAddress", 11030, 0)                     \
    X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0)                  \
    X(cuMemGetInfo, "cuMemGetInfo", 2000, 0)                              \
    X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0)                           \
    X(cuMemAlloc, "cuMemAlloc", 2000, 0)                                  \
    X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0)                               \
    X(cuMemAllocPitch, "cuMemAllocPitch", 2000, 0)                        \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0)                     \
    X(cuMemFree, "cuMemFree", 2000, 0)                                    \
    X(cuMemFree_v2, "cuMemFree", 3020, 0)                                 \
    X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0)                    \
    X(cuMemAllocHost, "cuMemAllocHost", 2000, 0)                          \
    X(cuMemAllocHost_v2, "cuMemAllocHost", 3020, 0)                       \
    X(cuMemHostAlloc, "cuMemHostAlloc", 2020, 0)                          \
    X(cuMemFreeHost, "cuMemFreeHost", 2000, 0)                            \
    X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0)                       \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 1)                  \
    X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0)                         \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 1)                    \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0)       \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 1)  \
    X(cuMemCreate, "cuMemCreate", 10020, 0)                               \
    X(cuMemRelease, "cuMemRelease", 10020, 0)                             \
    X(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", 11000, 0) \
    X(cuMemMap, "cuMemMap", 10020, 0)                                     \
    X(cuMemUnmap, "cuMemUnmap", 10020, 0)                                 \
    X(cuMemAddressReserve, "cuMemAddressReserve", 10020, 0)               \
    X(cuMemAddressFree, "cuMemAddressFree", 10020, 0)                     \
    X(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 7000, 0)       \
    X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0)   \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 7000, 0)   \
    X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, 0) \
    X(cuCtxCreate_v2, "cuCtxCreate", 3020, 0)                             \
    X(cuCtxCreate_v3, "cuCtxCreate", 11040, 0)                            \
    X(cuCtxCreate_v4, "cuCtxCreate", 12050, 0)                            \
    X(cuCtxDestroy_v2, "cuCtxDestroy", 4000, 0)                           \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0)                        \
    X(cuCtxPushCurrent, "cuCtxPushCurrent", 2000, 0)                      \
    X(cuCtxPushCurrent_v2, "cuCtxPushCurrent", 4000, 0)                   \
    X(cuCtxPopCurrent, "cuCtxPopCurrent", 2000, 0)                        \
    X(cuCtxPopCurrent_v2, "cuCtxPopCurrent", 4000, 0)

#define CUMEMTRACE_RUNTIME_HOOKS(X)                                       \
    X(cudaMalloc, "cudaMalloc", 0, 0)                                     \
    X(cudaMallocPitch, "cudaMallocPitch", 0, 0)                           \
    X(cudaMalloc3D, "cudaMalloc3D", 0, 0)                                 \
    X(cudaMallocManaged, "cudaMallocManaged", 0, 0)                       \
    X(cudaMallocHost, "cudaMallocHost", 0, 0)                             \
    X(cudaHostAlloc, "cudaHostAlloc", 0, 0)                               \
    X(cudaFreeHost, "cudaFreeHost", 0, 0)                                 \
    X(cudaFree, "cudaFree", 0, 0)                                         \
    X(cudaMallocAsync, "cudaMallocAsync", 0, 0)                           \
    X(cudaMallocAsync_ptsz, "cudaMallocAsync", 0, 1)                      \
    X(cudaFreeAsync, "cudaFreeAsync", 0, 0)                               \
    X(cudaFreeAsync_ptsz, "cudaFreeAsync", 0, 1)                          \
    X(cudaMallocFromPoolAsync, "cudaMallocFromPoolAsync", 0, 0)           \
    X(cudaMallocFromPoolAsync_ptsz, "cudaMallocFromPoolAsync", 0, 1)      \
    X(cudaMemGetInfo, "cudaMemGetInfo", 0, 0)                             \
    X(cudaDeviceReset, "cudaDeviceReset", 0, 0)                           \
    X(cudaSetDevice, "cudaSetDevice", 0, 0)                               \
    X(cudaGetDriverEntryPoint, "cudaGetDriverEntryPoint", 0, 0)           \
    X(cudaGetDriverEntryPoint_ptsz, "cudaGetDriverEntryPoint", 0, 1)      \
    X(cudaGetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion", 0, 0) \
    X(cudaGetDriverEntryPointByVersion_ptsz, "cudaGetDriverEntryPointByVersion", 0, 1)

#define CUMEMTRACE_HELPERS(H)                  \
    H(cuCtxGetDevice, "cuCtxGetDevice", 2000, 0) \
    H(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", 7000, 0) \
    H(cuCtxGetCurrent, "cuCtxGetCurrent", 4000, 0) \
    H(cudaGetDevice, "cudaGetDevice", 0, 0)    \
    H(cudaRuntimeGetVersion, "cudaRuntimeGetVersion", 0, 0)

#endif
