/* runtime_launch.c - nvcc's host-side registration and kernel launches on
 * the simulated device.
 *
 * A library built by nvcc registers its device code when it is loaded:
 * __cudaRegisterFatBinary, then __cudaRegisterFunction for every kernel's
 * host stub and __cudaRegisterVar for every __device__ variable,
 * __cudaRegisterFatBinaryEnd; __cudaUnregisterFatBinary at unload.  Here
 * that is bookkeeping only: a table of registered host functions (their
 * kernel handles) and variables, so that cudaFuncGetAttributes,
 * __cudaGetKernel and the launches can tell a kernel from any other pointer
 * (cudaErrorInvalidDeviceFunction, as NVIDIA's runtime).  PyTorch registers
 * tens of thousands of kernels at import: the table is a hash.
 *
 * A launch (<<<>>> pushes then pops the configuration; cudaLaunchKernel,
 * cudaLaunchKernelExC, CUDA 13's __cudaLaunchKernel) checks its arguments
 * and succeeds without running anything: the device has no memory contents
 * to compute on.  Host functions (cudaLaunchHostFunc, stream callbacks) do
 * run, at once, because work on a simulated stream completes at once.
 * Runtime-loaded libraries (cudaLibrary*) would need a real module loader:
 * cudaErrorNotSupported.
 */
#include "runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#define MAX_CALL_DEPTH 16 /* nested <<<>>> configurations in one thread */

/* A registered kernel or __device__ variable. */
struct registered {
    const void *host;  /* the key: the kernel's host stub, the variable's host shadow */
    const char *name;  /* kernels: the mangled device name (owned by the library) */
    size_t size;       /* variables: bytes */
    UT_hash_handle hh;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct registered *kernels, *symbols;
static int fatbin_handle; /* what every registration hands back: its address */

struct call_config {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
};
static _Thread_local struct call_config call_stack[MAX_CALL_DEPTH];
static _Thread_local int call_depth;

static struct registered *find(struct registered *const *table, const void *host)
{
    struct registered *r = NULL;
    pthread_mutex_lock(&lock);
    HASH_FIND_PTR(*table, &host, r);
    pthread_mutex_unlock(&lock);
    return r;
}

/* A second registration of the same address keeps the first.  Out of host
 * memory nothing is kept: a launch of the kernel then fails with
 * cudaErrorInvalidDeviceFunction, a copy to the variable with
 * cudaErrorInvalidValue. */
static void add(struct registered **table, const void *host, const char *name, size_t size)
{
    struct registered *r = malloc(sizeof *r);
    if (r == NULL)
        return;
    r->host = host;
    r->name = name;
    r->size = size;
    struct registered *old = NULL;
    pthread_mutex_lock(&lock);
    HASH_FIND_PTR(*table, &r->host, old);
    if (old == NULL)
        HASH_ADD_PTR(*table, host, r);
    pthread_mutex_unlock(&lock);
    if (old != NULL)
        free(r);
}

/* ---- registration (declared in NVIDIA's crt/host_runtime.h, which is not
 * part of the checked headers) ---- */

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, void *tid, void *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);

void **__cudaRegisterFatBinary(void *fatCubin)
{
    (void)fatCubin;
    return (void **)&fatbin_handle;
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

/* Kernels stay registered: a library that unloads takes its stubs with it,
 * and a stale entry is only looked up by an address no one calls. */
void __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    (void)fatCubinHandle;
}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, void *tid, void *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)fatCubinHandle, (void)deviceFun, (void)thread_limit, (void)tid, (void)bid;
    (void)bDim, (void)gDim, (void)wSize;
    add(&kernels, hostFun, deviceName, 0);
}

void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)fatCubinHandle, (void)deviceAddress, (void)deviceName, (void)ext;
    (void)constant, (void)global;
    add(&symbols, hostVar, NULL, size);
}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream)
{
    if (call_depth == MAX_CALL_DEPTH)
        return 1; /* nonzero: the <<<>>> expression skips the launch */
    call_stack[call_depth++] = (struct call_config){gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream)
{
    if (call_depth == 0)
        return cudaErrorInvalidValue;
    struct call_config c = call_stack[--call_depth];
    *gridDim = c.grid;
    *blockDim = c.block;
    *sharedMem = c.shared;
    memcpy(stream, &c.stream, sizeof c.stream);
    return cudaSuccess;
}

/* ---- launches ---- */

/* runtime_context's error, else cudaErrorInvalidDeviceFunction unless func
 * is a registered kernel's host stub. */
static cudaError_t kernel_context(const void *func)
{
    cudaError_t e = runtime_context();
    return e == cudaSuccess && find(&kernels, func) == NULL ? cudaErrorInvalidDeviceFunction : e;
}

static cudaError_t check_launch(const void *func, dim3 grid, dim3 block)
{
    cudaError_t e = kernel_context(func);
    if (e != cudaSuccess)
        return e;
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 ||
        grid.y > 65535 || grid.z > 65535)
        return cudaErrorInvalidValue; /* NVIDIA: cudaErrorInvalidConfiguration */
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    RUNTIME_ENTER(__cudaGetKernel);
    struct registered *k = func == NULL ? NULL : find(&kernels, func);
    cudaError_t e = kernel == NULL ? cudaErrorInvalidValue
                    : k == NULL    ? cudaErrorInvalidDeviceFunction
                                   : cudaSuccess;
    if (e == cudaSuccess)
        *kernel = (cudaKernel_t)(void *)k;
    return runtime_leave(RSYM___cudaGetKernel, e, "(%p)", func);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream)
{
    RUNTIME_ENTER(__cudaLaunchKernel);
    (void)args;
    const struct registered *k = (const struct registered *)(void *)kernel;
    cudaError_t e = k == NULL ? cudaErrorInvalidDeviceFunction
                              : check_launch(k->host, gridDim, blockDim);
    return runtime_leave(RSYM___cudaLaunchKernel, e, "(%s, %zu, %p)", k ? k->name : "(null)",
                         sharedMem, (void *)stream);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                             size_t sharedMem, cudaStream_t stream)
{
    RUNTIME_ENTER(cudaLaunchKernel);
    (void)args;
    cudaError_t e = check_launch(func, gridDim, blockDim);
    return runtime_leave(RSYM_cudaLaunchKernel, e, "(%p, %zu, %p)", func, sharedMem,
                         (void *)stream);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
    RUNTIME_ENTER(cudaLaunchKernelExC);
    (void)args;
    cudaError_t e = config == NULL ? cudaErrorInvalidValue
                                   : check_launch(func, config->gridDim, config->blockDim);
    return runtime_leave(RSYM_cudaLaunchKernelExC, e, "(%p)", func);
}

cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                        void **args, size_t sharedMem, cudaStream_t stream)
{
    RUNTIME_ENTER(cudaLaunchCooperativeKernel);
    (void)args;
    cudaError_t e = check_launch(func, gridDim, blockDim);
    return runtime_leave(RSYM_cudaLaunchCooperativeKernel, e, "(%p, %zu, %p)", func, sharedMem,
                         (void *)stream);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    RUNTIME_ENTER(cudaLaunchHostFunc);
    cudaError_t e = fn == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess)
        fn(userData);
    return runtime_leave(RSYM_cudaLaunchHostFunc, e, "(%p)", (void *)stream);
}

/* ---- kernel attributes ---- */

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    RUNTIME_ENTER(cudaFuncGetAttributes);
    cudaError_t e = attr == NULL ? cudaErrorInvalidValue : kernel_context(func);
    if (e == cudaSuccess) {
        /* What a small elementwise kernel built for sm_90 reports. */
        memset(attr, 0, sizeof *attr);
        attr->maxThreadsPerBlock = 1024;
        attr->numRegs = 32;
        attr->ptxVersion = 90;
        attr->binaryVersion = 90;
        attr->maxDynamicSharedSizeBytes = 48 * 1024;
        attr->preferredShmemCarveout = -1;
    }
    return runtime_leave(RSYM_cudaFuncGetAttributes, e, "(%p)", func);
}

RUNTIME_CALL(cudaFuncSetAttribute, (const void *func, enum cudaFuncAttribute attr, int value),
             kernel_context(func), "(%p, %d, %d)", func, (int)attr, value)

RUNTIME_CALL(cudaKernelSetAttributeForDevice,
             (cudaKernel_t kernel, enum cudaFuncAttribute attr, int value, int device),
             kernel == NULL ? cudaErrorInvalidDeviceFunction : runtime_check_device(device),
             "(%d, %d, %d)", (int)attr, value, device)

/* 2048 resident threads per SM, at most 32 blocks. */
static cudaError_t occupancy(int *numBlocks, const void *func, int blockSize)
{
    cudaError_t e = numBlocks == NULL || blockSize <= 0 ? cudaErrorInvalidValue
                                                        : kernel_context(func);
    if (e == cudaSuccess) {
        int n = 2048 / blockSize;
        *numBlocks = n > 32 ? 32 : n;
    }
    return e;
}

RUNTIME_CALL(cudaOccupancyMaxActiveBlocksPerMultiprocessor,
             (int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize),
             occupancy(numBlocks, func, blockSize), "(%p, %d, %zu)", func, blockSize,
             dynamicSMemSize)

RUNTIME_CALL(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
             (int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize,
              unsigned int flags),
             occupancy(numBlocks, func, blockSize), "(%p, %d, %zu, %u)", func, blockSize,
             dynamicSMemSize, flags)

/* ---- __device__ variables ---- */

/* The device copy of a variable is its host shadow: kernels never run, and
 * copies to and from it then behave as on real memory. */
cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    RUNTIME_ENTER(cudaGetSymbolAddress);
    cudaError_t e = devPtr == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess && find(&symbols, symbol) == NULL)
        e = cudaErrorInvalidValue; /* NVIDIA: cudaErrorInvalidSymbol */
    if (e == cudaSuccess)
        *devPtr = (void *)symbol;
    return runtime_leave(RSYM_cudaGetSymbolAddress, e, "(%p)", symbol);
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind)
{
    RUNTIME_ENTER(cudaMemcpyToSymbol);
    cudaError_t e = runtime_context();
    struct registered *s = e == cudaSuccess ? find(&symbols, symbol) : NULL;
    if (e == cudaSuccess && (s == NULL || offset > s->size || count > s->size - offset ||
                             (unsigned)kind > cudaMemcpyDefault))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess && count > 0) {
        if (runtime_device_only(src))
            memset((char *)symbol + offset, 0, count);
        else
            memmove((char *)symbol + offset, src, count);
    }
    return runtime_leave(RSYM_cudaMemcpyToSymbol, e, "(%p, %zu, %zu)", symbol, count, offset);
}

/* ---- runtime-loaded libraries: not simulated ---- */

#define NOT_SIMULATED "not simulated"
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryLoadData,
                (cudaLibrary_t *library, const void *code, enum cudaJitOption *jitOptions,
                 void **jitOptionsValues, unsigned int numJitOptions,
                 enum cudaLibraryOption *libraryOptions, void **libraryOptionValues,
                 unsigned int numLibraryOptions))
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryLoadFromFile,
                (cudaLibrary_t *library, const char *fileName, enum cudaJitOption *jitOptions,
                 void **jitOptionsValues, unsigned int numJitOptions,
                 enum cudaLibraryOption *libraryOptions, void **libraryOptionValues,
                 unsigned int numLibraryOptions))
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryUnload, (cudaLibrary_t library))
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryGetKernel,
                (cudaKernel_t *pKernel, cudaLibrary_t library, const char *name))
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryGetKernelCount, (unsigned int *count, cudaLibrary_t lib))
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryGetGlobal,
                (void **dptr, size_t *bytes, cudaLibrary_t library, const char *name))
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryGetManaged,
                (void **dptr, size_t *bytes, cudaLibrary_t library, const char *name))
RUNTIME_REFUSED(NOT_SIMULATED, cudaLibraryGetUnifiedFunction,
                (void **fptr, cudaLibrary_t library, const char *symbol))
