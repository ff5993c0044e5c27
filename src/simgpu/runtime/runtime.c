/* runtime.c - the simulated CUDA runtime: how it reaches the driver, devices,
 * errors and driver entry points.  Built twice from the same objects:
 * libcudart.so.13 and libcudart_static.a.
 *
 * It reaches the driver exactly as NVIDIA's libcudart 13.0 does (observed,
 * see tests/data/README.md), because that path is what an interposer must
 * survive: on first use (pthread_once) it dlopen()s "libcuda.so.1"
 * RTLD_NOW|RTLD_LOCAL, takes "cuGetProcAddress_v2" with its only dlsym(),
 * then calls it once per row of cudart_lookups.h, in order, with the row's
 * (name, version, flags) - 440 look-ups starting with the empty name at
 * version 0; failures are normal and ignored - and calls every driver
 * function through the pointers those look-ups returned.  It never links
 * to libcuda and never names a cu* symbol (the tests check the archive with
 * nm).  Then cuInit(0).  No libcuda.so.1: cudaErrorInsufficientDriver.
 *
 * Threads: each thread has a current device (cudaSetDevice, default 0) and a
 * last error.  A device's primary context is retained once per process (under
 * `lock`) and made current on a thread the first time that thread needs it.
 * Order: initialisation never calls back into the runtime.
 */
#include "runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "sim_common.h"

#define SPEAKER "simcudart"
#define MAX_DEVICES 64 /* beyond anything the simulated driver offers */

struct runtime_driver runtime_drv;

/* The look-ups of NVIDIA's runtime, generated from
 * tests/data/cudart-13.0-getprocaddress.tsv by the Makefile. */
static const struct lookup {
    const char *name;
    int version;
    int flags;
} lookups[] = {
#include "cudart_lookups.h"
};
static void *found[sizeof lookups / sizeof lookups[0]];

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static cudaError_t init_error;    /* why no device is usable, or cudaSuccess */
static int driver_loaded;         /* libcuda.so.1 answered */
static int ndevices;
static int log_calls;             /* SIMCUDA_LOG */
static struct sim_fault_set faults;
static atomic_ulong calls[RUNTIME_NSYMS];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[MAX_DEVICES]; /* retained primary contexts, under lock */
static CUdevice cudev[MAX_DEVICES];

static _Thread_local int tls_device;      /* cudaSetDevice */
static _Thread_local int tls_bound = -1;  /* device whose context this thread made current */
static _Thread_local cudaError_t tls_last_error;

#define RUNTIME_SYM_NAME(s) #s,
static const char *const sym_names[] = {RUNTIME_SYMBOLS(RUNTIME_SYM_NAME)};
#undef RUNTIME_SYM_NAME

/* ---- initialisation ---- */

static void before_fork(void)
{
    pthread_mutex_lock(&lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

static void after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}

/* The pointer the driver returned for row (name, version, flags). */
static void *looked_up(const char *name, int version, int flags)
{
    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++)
        if (lookups[i].version == version && lookups[i].flags == flags &&
            strcmp(lookups[i].name, name) == 0)
            return found[i];
    return NULL;
}

#define USE(fn, name, version, flags) \
    runtime_drv.fn = (__typeof__(runtime_drv.fn))looked_up(#name, version, flags);

static void pick_driver_functions(void)
{
    RUNTIME_DRIVER_FUNCTIONS(USE)
}
#undef USE

static cudaError_t start_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return cudaErrorInsufficientDriver;
    __typeof__(cuGetProcAddress_v2) *get_proc =
        (__typeof__(cuGetProcAddress_v2) *)dlsym(h, "cuGetProcAddress_v2");
    if (get_proc == NULL)
        return cudaErrorInsufficientDriver;
    for (size_t i = 0; i < sizeof lookups / sizeof lookups[0]; i++) {
        CUdriverProcAddressQueryResult status;
        if (get_proc(lookups[i].name, &found[i], lookups[i].version,
                     (cuuint64_t)lookups[i].flags, &status) != CUDA_SUCCESS)
            found[i] = NULL; /* not every driver has every function */
    }
    pick_driver_functions();
    driver_loaded = 1;

    if (runtime_drv.cuInit == NULL || runtime_drv.cuDeviceGetCount == NULL)
        return cudaErrorInsufficientDriver;
    CUresult r = runtime_drv.cuInit(0);
    if (r == CUDA_SUCCESS)
        r = runtime_drv.cuDeviceGetCount(&ndevices);
    if (r != CUDA_SUCCESS)
        return runtime_result(r);
    if (ndevices == 0)
        return cudaErrorNoDevice;
    if (ndevices > MAX_DEVICES)
        ndevices = MAX_DEVICES;
    return cudaSuccess;
}

static void init(void)
{
    log_calls = sim_common_env_flag("SIMCUDA_LOG");
    sim_common_fault_parse(&faults, sim_common_getenv("SIMCUDA_FAIL"), SPEAKER, 1, sym_names,
                           RUNTIME_NSYMS);
    init_error = start_driver();
    /* Registered after the driver registered its own: fork handlers run in
     * reverse order, so the runtime lock is taken before the driver's - the
     * order every runtime call takes them in. */
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* ---- call accounting ---- */

static const char *error_word(cudaError_t e, int want_name);

cudaError_t runtime_enter(enum runtime_sym s)
{
    pthread_once(&init_once, init);
    unsigned long n = atomic_fetch_add(&calls[s], 1) + 1;
    long code;
    if (!sim_common_fault_hit(&faults, (int)s, n, &code))
        return cudaSuccess;
    if (code == 0) /* the allocating entry points fail as out of memory */
        code = strncmp(sym_names[s], "cudaMalloc", 10) == 0 ||
                       strcmp(sym_names[s], "cudaHostAlloc") == 0
                   ? cudaErrorMemoryAllocation
                   : cudaErrorUnknown;
    return (cudaError_t)code;
}

cudaError_t runtime_leave(enum runtime_sym s, cudaError_t e, const char *fmt, ...)
{
    if (e != cudaSuccess)
        tls_last_error = e;
    if (!log_calls)
        return e;
    char details[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(details, sizeof details, fmt, ap);
    va_end(ap);
    sim_common_say(SPEAKER, "%s%s = %s", sym_names[s], details, error_word(e, 1));
    return e;
}

cudaError_t runtime_ready(void)
{
    return init_error;
}

int runtime_current_device(void)
{
    return tls_device;
}

int runtime_device_only(const void *p)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    /* Not the 32-bit window of the pre-3.2 entry points: a host heap may
     * reach 2 GiB, and the runtime never allocates there. */
    return a >= SIM_DEVICE_WINDOW_BASE && a < SIM_DEVICE_WINDOW_END;
}

int runtime_valid_device(int dev)
{
    return dev >= 0 && dev < ndevices;
}

cudaError_t runtime_check_device(int dev)
{
    if (init_error != cudaSuccess)
        return init_error;
    return runtime_valid_device(dev) ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t runtime_context(void)
{
    if (init_error != cudaSuccess)
        return init_error;
    int d = tls_device;
    if (tls_bound == d)
        return cudaSuccess;
    if (runtime_drv.cuDeviceGet == NULL || runtime_drv.cuDevicePrimaryCtxRetain == NULL ||
        runtime_drv.cuCtxSetCurrent == NULL)
        return cudaErrorInsufficientDriver;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    if (primary[d] == NULL) {
        r = runtime_drv.cuDeviceGet(&cudev[d], d);
        if (r == CUDA_SUCCESS)
            r = runtime_drv.cuDevicePrimaryCtxRetain(&primary[d], cudev[d]);
    }
    CUcontext ctx = primary[d];
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS)
        r = runtime_drv.cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS)
        return runtime_result(r);
    tls_bound = d;
    return cudaSuccess;
}

/* ---- errors ---- */

cudaError_t runtime_result(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_ILLEGAL_ADDRESS: return cudaErrorIllegalAddress;
    case CUDA_ERROR_NOT_PERMITTED: return cudaErrorNotPermitted;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    default: return cudaErrorUnknown;
    }
}

static const struct {
    cudaError_t code;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction",
     "invalid device function"},
    {cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported",
     "peer access is not supported between these two devices"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

static const char *error_word(cudaError_t e, int want_name)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == e)
            return want_name ? errors[i].name : errors[i].text;
    return "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error)
{
    return error_word(error, 1);
}

const char *cudaGetErrorString(cudaError_t error)
{
    return error_word(error, 0);
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = tls_last_error;
    tls_last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return tls_last_error;
}

/* ---- versions ---- */

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    RUNTIME_ENTER(cudaRuntimeGetVersion);
    cudaError_t e = runtimeVersion == NULL ? cudaErrorInvalidValue : cudaSuccess;
    if (e == cudaSuccess)
        *runtimeVersion = SIM_RUNTIME_VERSION;
    return runtime_leave(RSYM_cudaRuntimeGetVersion, e, "()");
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    RUNTIME_ENTER(cudaDriverGetVersion);
    cudaError_t e = cudaErrorInvalidValue;
    if (driverVersion != NULL) {
        e = cudaSuccess;
        *driverVersion = 0; /* documented: 0 when no driver is installed */
        if (driver_loaded && runtime_drv.cuDriverGetVersion != NULL)
            e = runtime_result(runtime_drv.cuDriverGetVersion(driverVersion));
    }
    return runtime_leave(RSYM_cudaDriverGetVersion, e, "()");
}

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
    RUNTIME_ENTER(cudaGetDeviceCount);
    cudaError_t e = count == NULL ? cudaErrorInvalidValue : runtime_ready();
    if (count != NULL)
        *count = e == cudaSuccess ? ndevices : 0;
    return runtime_leave(RSYM_cudaGetDeviceCount, e, "() -> %d", count ? *count : -1);
}

cudaError_t cudaSetDevice(int device)
{
    RUNTIME_ENTER(cudaSetDevice);
    cudaError_t e = runtime_check_device(device);
    if (e == cudaSuccess) {
        tls_device = device;
        e = runtime_context(); /* since CUDA 12 the context is made at once */
    }
    return runtime_leave(RSYM_cudaSetDevice, e, "(%d)", device);
}

cudaError_t cudaGetDevice(int *device)
{
    RUNTIME_ENTER(cudaGetDevice);
    cudaError_t e = device == NULL ? cudaErrorInvalidValue : runtime_ready();
    if (e == cudaSuccess)
        *device = tls_device;
    return runtime_leave(RSYM_cudaGetDevice, e, "() -> %d", tls_device);
}

cudaError_t cudaDeviceSynchronize(void)
{
    RUNTIME_ENTER(cudaDeviceSynchronize);
    cudaError_t e = runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuCtxSynchronize, ());
    return runtime_leave(RSYM_cudaDeviceSynchronize, e, "()");
}

cudaError_t cudaDeviceReset(void)
{
    RUNTIME_ENTER(cudaDeviceReset);
    cudaError_t e = runtime_context();
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuDevicePrimaryCtxReset, (cudev[tls_device]));
    return runtime_leave(RSYM_cudaDeviceReset, e, "() device %d", tls_device);
}

/* ---- driver entry points ---- */

static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const unsigned long long known = cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream;
    if (symbol == NULL || funcPtr == NULL || (flags & ~known) != 0 || cudaVersion > INT32_MAX)
        return cudaErrorInvalidValue;
    if (!driver_loaded)
        return runtime_ready();
    if (runtime_drv.cuGetProcAddress_v2 == NULL)
        return cudaErrorInsufficientDriver;
    /* This runtime is built for the legacy default stream, so "default"
     * means legacy, as for NVIDIA's non-_ptsz entry point. */
    cuuint64_t cuflags = flags == cudaEnableDefault ? CU_GET_PROC_ADDRESS_LEGACY_STREAM : flags;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = runtime_drv.cuGetProcAddress_v2(symbol, funcPtr, (int)cudaVersion, cuflags, &st);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_FOUND) {
        *funcPtr = NULL;
        return runtime_result(r);
    }
    /* Documented: a symbol the driver lacks is cudaSuccess with a NULL
     * pointer; driverStatus says why. */
    if (r != CUDA_SUCCESS)
        *funcPtr = NULL;
    if (driverStatus != NULL)
        *driverStatus = st == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
                        : st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            ? cudaDriverEntryPointVersionNotSufficent
                            : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

RUNTIME_CALL(cudaGetDriverEntryPoint,
             (const char *symbol, void **funcPtr, unsigned long long flags,
              enum cudaDriverEntryPointQueryResult *driverStatus),
             entry_point(symbol, funcPtr, SIM_RUNTIME_VERSION, flags, driverStatus),
             "(\"%s\", %llu) -> %p", symbol ? symbol : "(null)", flags,
             e == cudaSuccess ? *funcPtr : NULL)
RUNTIME_CALL(cudaGetDriverEntryPointByVersion,
             (const char *symbol, void **funcPtr, unsigned int cudaVersion,
              unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus),
             entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus),
             "(\"%s\", %u, %llu) -> %p", symbol ? symbol : "(null)", cudaVersion, flags,
             e == cudaSuccess ? *funcPtr : NULL)
