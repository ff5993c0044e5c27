/* runtime.h - internals shared by the files of the simulated CUDA runtime
 * (libcudart.so.13 and libcudart_static.a).
 *
 * Every exported function begins with runtime_enter (first-use
 * initialisation, call counting, SIMCUDA_FAIL) and ends with runtime_leave
 * (last error, SIMCUDA_LOG).  The driver is reached only through
 * runtime_drv, filled by runtime.c from cuGetProcAddress_v2: nothing here
 * may name a cu* function outside __typeof__, so the archive has no
 * undefined cu* symbol.  Nothing here is exported.
 */
#ifndef CUMEMTRACE_SIM_RUNTIME_H
#define CUMEMTRACE_SIM_RUNTIME_H

#include "cuda_api.h"

#pragma GCC visibility push(hidden)

#define SIM_RUNTIME_VERSION 13000

/* X(symbol, allocates): the runtime functions SIMCUDA_FAIL may fail.
 * `allocates` picks the default injected error: cudaErrorMemoryAllocation
 * or cudaErrorUnknown.  (cudaGetLastError, cudaPeekAtLastError and the error
 * strings cannot fail.) */
#define RUNTIME_SYMBOLS(X)                                                         \
    X(cudaMalloc, 1) X(cudaMallocPitch, 1) X(cudaMalloc3D, 1)                      \
    X(cudaMallocManaged, 1) X(cudaMallocHost, 1) X(cudaHostAlloc, 1)               \
    X(cudaMallocAsync, 1) X(cudaMallocAsync_ptsz, 1) X(cudaMallocFromPoolAsync, 1) \
    X(cudaMallocFromPoolAsync_ptsz, 1) X(cudaFreeHost, 0) X(cudaFree, 0)           \
    X(cudaFreeAsync, 0) X(cudaFreeAsync_ptsz, 0) X(cudaMemGetInfo, 0)              \
    X(cudaSetDevice, 0) X(cudaGetDevice, 0) X(cudaGetDeviceCount, 0)               \
    X(cudaDeviceSynchronize, 0) X(cudaDeviceReset, 0)                              \
    X(cudaDeviceGetDefaultMemPool, 0) X(cudaRuntimeGetVersion, 0)                  \
    X(cudaDriverGetVersion, 0) X(cudaGetDriverEntryPoint, 0)                       \
    X(cudaGetDriverEntryPointByVersion, 0)

#define RUNTIME_SYM_ENUM(s, a) RSYM_##s,
enum runtime_sym { RUNTIME_SYMBOLS(RUNTIME_SYM_ENUM) RUNTIME_NSYMS };
#undef RUNTIME_SYM_ENUM

/* The driver functions the runtime calls.  Each comes from the
 * cuGetProcAddress_v2 answer to one row of cudart_lookups.h (the look-ups
 * NVIDIA's runtime 13.0 makes); NULL when the driver did not provide it. */
struct runtime_driver {
    __typeof__(cuInit) *cuInit;
    __typeof__(cuDriverGetVersion) *cuDriverGetVersion;
    __typeof__(cuGetProcAddress_v2) *cuGetProcAddress_v2;
    __typeof__(cuDeviceGet) *cuDeviceGet;
    __typeof__(cuDeviceGetCount) *cuDeviceGetCount;
    __typeof__(cuDevicePrimaryCtxRetain) *cuDevicePrimaryCtxRetain;
    __typeof__(cuDevicePrimaryCtxReset) *cuDevicePrimaryCtxReset; /* the 7000 look-up: v1 */
    __typeof__(cuCtxSetCurrent) *cuCtxSetCurrent;
    __typeof__(cuCtxSynchronize) *cuCtxSynchronize;
    __typeof__(cuMemGetInfo_v2) *cuMemGetInfo_v2;
    __typeof__(cuMemAlloc_v2) *cuMemAlloc_v2;
    __typeof__(cuMemAllocPitch_v2) *cuMemAllocPitch_v2;
    __typeof__(cuMemFree_v2) *cuMemFree_v2;
    __typeof__(cuMemAllocManaged) *cuMemAllocManaged;
    __typeof__(cuMemHostAlloc) *cuMemHostAlloc;
    __typeof__(cuMemFreeHost) *cuMemFreeHost;
    __typeof__(cuMemAllocAsync) *cuMemAllocAsync;
    __typeof__(cuMemAllocAsync_ptsz) *cuMemAllocAsync_ptsz;
    __typeof__(cuMemFreeAsync) *cuMemFreeAsync;
    __typeof__(cuMemFreeAsync_ptsz) *cuMemFreeAsync_ptsz;
    __typeof__(cuMemAllocFromPoolAsync) *cuMemAllocFromPoolAsync;
    __typeof__(cuMemAllocFromPoolAsync_ptsz) *cuMemAllocFromPoolAsync_ptsz;
    __typeof__(cuDeviceGetDefaultMemPool) *cuDeviceGetDefaultMemPool;
};

extern struct runtime_driver runtime_drv;

/* Initialises the runtime once per process (see runtime.c), counts a call
 * of s and applies SIMCUDA_FAIL: cudaSuccess, or the error the call must
 * return without doing anything. */
cudaError_t runtime_enter(enum runtime_sym s);

/* Records e as the thread's last error (unless cudaSuccess), logs the call
 * under SIMCUDA_LOG ("simcudart: <sym><details> = <error name>") and
 * returns e. */
cudaError_t runtime_leave(enum runtime_sym s, cudaError_t e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define RUNTIME_ENTER(s)                                                       \
    do {                                                                       \
        cudaError_t fault_ = runtime_enter(RSYM_##s);                          \
        if (fault_ != cudaSuccess)                                             \
            return runtime_leave(RSYM_##s, fault_, " (SIMCUDA_FAIL)");         \
    } while (0)

/* Why the runtime cannot reach a device (cudaErrorInsufficientDriver when
 * libcuda.so.1 is missing, cudaErrorNoDevice, ...) or cudaSuccess. */
cudaError_t runtime_ready(void);

/* Makes the primary context of the thread's current device current on the
 * thread, retaining it on first use in the process. */
cudaError_t runtime_context(void);

/* Whether dev is an ordinal the driver reported. */
int runtime_valid_device(int dev);

/* The CUresult -> cudaError_t mapping of NVIDIA's runtime. */
cudaError_t runtime_result(CUresult r);

/* cudaSuccess when the driver provided runtime_drv.fn, otherwise what a
 * program gets from a driver too old for the runtime. */
#define RUNTIME_HAVE(fn) \
    (runtime_drv.fn != NULL ? cudaSuccess : cudaErrorInsufficientDriver)

#pragma GCC visibility pop

#endif
