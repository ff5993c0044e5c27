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

/* The runtime version the simulated libcudart reports: CUDA 13.0, the
 * toolkit this project builds against (PyTorch only requires the major
 * version to match what its wheel was built for). */
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
    X(cudaGetDriverEntryPointByVersion, 0)                                          \
    X(cudaGetDeviceProperties, 0) X(cudaDeviceGetAttribute, 0)                     \
    X(cudaDeviceGetPCIBusId, 0) X(cudaDeviceCanAccessPeer, 0)                      \
    X(cudaDeviceEnablePeerAccess, 0) X(cudaDeviceGetStreamPriorityRange, 0)        \
    X(cudaPointerGetAttributes, 0) X(cudaFuncGetAttributes, 0)                     \
    X(cudaFuncSetAttribute, 0) X(cudaKernelSetAttributeForDevice, 0)               \
    X(cudaLaunchKernel, 0) X(cudaLaunchKernelExC, 0)                               \
    X(cudaLaunchCooperativeKernel, 0) X(cudaLaunchHostFunc, 0)                     \
    X(cudaOccupancyMaxActiveBlocksPerMultiprocessor, 0)                            \
    X(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 0)                   \
    X(cudaGetSymbolAddress, 0) X(cudaMemcpyToSymbol, 0)                            \
    X(cudaLibraryLoadData, 0) X(cudaLibraryLoadFromFile, 0)                        \
    X(cudaLibraryUnload, 0) X(cudaLibraryGetKernel, 0)                             \
    X(cudaLibraryGetKernelCount, 0) X(cudaLibraryGetGlobal, 0)                     \
    X(cudaLibraryGetManaged, 0) X(cudaLibraryGetUnifiedFunction, 0)                \
    X(__cudaGetKernel, 0) X(__cudaLaunchKernel, 0) X(cudaStreamCreate, 0)          \
    X(cudaStreamCreateWithFlags, 0) X(cudaStreamCreateWithPriority, 0)             \
    X(cudaStreamDestroy, 0) X(cudaStreamGetPriority, 0) X(cudaStreamQuery, 0)      \
    X(cudaStreamSynchronize, 0) X(cudaStreamWaitEvent, 0)                          \
    X(cudaStreamAddCallback, 0) X(cudaStreamIsCapturing, 0)                        \
    X(cudaStreamGetCaptureInfo, 0) X(cudaStreamBeginCapture, 0)                    \
    X(cudaStreamBeginCaptureToGraph, 0) X(cudaStreamEndCapture, 0)                 \
    X(cudaStreamUpdateCaptureDependencies, 0)                                      \
    X(cudaThreadExchangeStreamCaptureMode, 0) X(cudaEventCreate, 0)                \
    X(cudaEventCreateWithFlags, 0) X(cudaEventDestroy, 0) X(cudaEventRecord, 0)    \
    X(cudaEventRecordWithFlags, 0) X(cudaEventQuery, 0)                            \
    X(cudaEventSynchronize, 0) X(cudaEventElapsedTime, 0) X(cudaGraphAddNode, 0)   \
    X(cudaGraphConditionalHandleCreate, 0) X(cudaGraphDestroy, 0)                  \
    X(cudaGraphExecDestroy, 0) X(cudaGraphGetNodes, 0)                             \
    X(cudaGraphInstantiate, 0) X(cudaGraphInstantiateWithFlags, 0)                 \
    X(cudaGraphLaunch, 0) X(cudaGraphNodeGetDependencies, 0)                       \
    X(cudaGraphRetainUserObject, 0) X(cudaUserObjectCreate, 0)                     \
    X(cudaUserObjectRelease, 0) X(cudaDeviceGetGraphMemAttribute, 0)               \
    X(cudaDeviceSetGraphMemAttribute, 0) X(cudaProfilerStart, 0)                   \
    X(cudaProfilerStop, 0) X(cudaMemcpy, 0) X(cudaMemcpyAsync, 0)                  \
    X(cudaMemcpy2DAsync, 0) X(cudaMemcpyPeerAsync, 0) X(cudaMemset, 0)             \
    X(cudaMemsetAsync, 0) X(cudaHostRegister, 0) X(cudaHostUnregister, 0)          \
    X(cudaIpcGetMemHandle, 0) X(cudaIpcOpenMemHandle, 0)                           \
    X(cudaIpcCloseMemHandle, 0) X(cudaIpcGetEventHandle, 0)                        \
    X(cudaIpcOpenEventHandle, 0) X(cudaMemPoolGetAttribute, 0)                     \
    X(cudaMemPoolSetAttribute, 0) X(cudaMemPoolTrimTo, 0)                          \
    X(cudaMemPoolSetAccess, 0)

#define RUNTIME_SYM_ENUM(s, a) RSYM_##s,
enum runtime_sym { RUNTIME_SYMBOLS(RUNTIME_SYM_ENUM) RUNTIME_NSYMS };
#undef RUNTIME_SYM_ENUM

/* X(function, name, version, flags): the driver functions the runtime
 * calls, each the cuGetProcAddress_v2 answer to the row (name, version,
 * flags) of cudart_lookups.h (the look-ups NVIDIA's runtime 13.0 makes);
 * NULL when the driver did not provide it. */
#define RUNTIME_DRIVER_FUNCTIONS(X)\
    X(cuInit, cuInit, 2000, 0) X(cuDriverGetVersion, cuDriverGetVersion, 2020, 0)                 \
    X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0) X(cuDeviceGet, cuDeviceGet, 2000, 0)       \
    X(cuDeviceGetCount, cuDeviceGetCount, 2000, 0)                                                \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0)                                \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0)                                  \
    X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0)                                                  \
    X(cuCtxSynchronize, cuCtxSynchronize, 2000, 0) X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0)      \
    X(cuMemAlloc_v2, cuMemAlloc, 3020, 0) X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0)         \
    X(cuMemFree_v2, cuMemFree, 3020, 0) X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0)          \
    X(cuMemHostAlloc, cuMemHostAlloc, 2020, 0) X(cuMemFreeHost, cuMemFreeHost, 2000, 0)           \
    X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0)                                                 \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 2)                                            \
    X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)                                                   \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 2)                                              \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)                                 \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 2)                            \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0)                             \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0)                                     \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, 0)                                     \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0)                                                 \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0)                                        \
    X(cuDeviceGetName, cuDeviceGetName, 2000, 0)                                                  \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0)                                             \
    X(cuDeviceGetUuid_v2, cuDeviceGetUuid, 9020, 0)

#define RUNTIME_DRIVER_FIELD(fn, ...) __typeof__(fn) *fn;
struct runtime_driver { RUNTIME_DRIVER_FUNCTIONS(RUNTIME_DRIVER_FIELD) };
#undef RUNTIME_DRIVER_FIELD

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

/* An entry point whose whole work is the one expression `call`: entered, then
 * logged with the format and arguments that follow, which may read its
 * result as e. */
#define RUNTIME_CALL(s, params, call, ...)                                     \
    cudaError_t s params                                                       \
    {                                                                          \
        RUNTIME_ENTER(s);                                                      \
        cudaError_t e = call;                                                  \
        return runtime_leave(RSYM_##s, e, __VA_ARGS__);                        \
    }

/* An entry point the simulator refuses (graphs, IPC, runtime-loaded
 * libraries): counted and faulted like the others, then cudaErrorNotSupported
 * with `why` in the log.  Its parameters are the API's and go unused. */
#define RUNTIME_REFUSED(why, sym, params)                                        \
    _Pragma("GCC diagnostic push")                                             \
    _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"")                   \
    cudaError_t sym params                                                     \
    {                                                                          \
        RUNTIME_ENTER(sym);                                                    \
        return runtime_leave(RSYM_##sym, cudaErrorNotSupported, "() (" why ")"); \
    }                                                                          \
    _Pragma("GCC diagnostic pop")

/* Why the runtime cannot reach a device (cudaErrorInsufficientDriver when
 * libcuda.so.1 is missing, cudaErrorNoDevice, ...) or cudaSuccess. */
cudaError_t runtime_ready(void);

/* Makes the primary context of the thread's current device current on the
 * thread, retaining it on first use in the process. */
cudaError_t runtime_context(void);

/* Whether dev is an ordinal the driver reported. */
int runtime_valid_device(int dev);

/* The thread's current device (cudaSetDevice). */
int runtime_current_device(void);

/* Whether p is in the simulated devices' address windows: memory no host
 * code may touch (see SIM_DEVICE_WINDOW in sim_common.h). */
int runtime_device_only(const void *p);

/* runtime_pinned.c: page-locked host ranges (cudaMallocHost, cudaHostAlloc,
 * cudaHostRegister); add and remove take the start the caller got or gave,
 * runtime_pinned says whether p lies in one. */
void runtime_pinned_add(const void *p, size_t len);
void runtime_pinned_remove(const void *p);
int runtime_pinned(const void *p);

/* runtime_backing.c: what copies and memsets wrote into device memory, so
 * that it reads back (bounded; the first read of bytes no copy wrote is
 * reported once).  write/fill keep [addr, addr+len); read fills dst (zeros
 * where nothing was kept); copy is device to device. */
void runtime_backing_write(uint64_t addr, const void *src, uint64_t len);
void runtime_backing_fill(uint64_t addr, int value, uint64_t len);
void runtime_backing_read(void *dst, uint64_t addr, uint64_t len);
void runtime_backing_copy(uint64_t dst, uint64_t src, uint64_t len);

/* The CUresult -> cudaError_t mapping of NVIDIA's runtime. */
cudaError_t runtime_result(CUresult r);

/* cudaSuccess when the driver provided runtime_drv.fn, otherwise what a
 * program gets from a driver too old for the runtime. */
#define RUNTIME_HAVE(fn) \
    (runtime_drv.fn != NULL ? cudaSuccess : cudaErrorInsufficientDriver)

/* The driver's answer to fn args, or RUNTIME_HAVE's error when fn is NULL
 * (a function the driver did not provide). */
#define RUNTIME_DRIVER(fn, args) \
    ((fn) != NULL ? runtime_result((fn) args) : cudaErrorInsufficientDriver)

#pragma GCC visibility pop

#endif
