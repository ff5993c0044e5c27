/* hooks_context.c - context lifetimes: what the driver frees when a context
 * goes, so the snapshot and CUMEMTRACE_LIMIT stop counting it; and the calls
 * that change a thread's current context or device, which only forget the
 * device the wrappers cache per thread (call_state.c).
 *
 * NVIDIA's documentation (cuda.h, cuCtxDestroy; cudaDeviceReset): destroying
 * a context frees its cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged and
 * cuMemAllocHost memory - the runtime's cudaMalloc, cudaMallocPitch,
 * cudaMallocManaged and cudaMallocHost - but "will not destroy memory
 * allocations by cuMemCreate(), cuMemAllocAsync() and
 * cuMemAllocFromPoolAsync(). These memory allocations are not associated
 * with any CUDA context".  A primary context is destroyed by
 * cuDevicePrimaryCtxReset (cudaDeviceReset) and by the release of its last
 * reference ("the context is automatically reset once the last reference to
 * it is released").  The tracker forgets what the driver freed, as frees.
 *
 * Order: the real call first; only a successful one frees anything.  The
 * runtime's cudaDeviceReset reaches the driver through our wrappers too; the
 * re-entry guard makes only the outermost call forget (once is enough, and
 * forgetting twice would find nothing anyway).
 *
 * Exit: NVIDIA's runtime releases its primary contexts from an atexit
 * handler it registers when it initialises - before ours would run.  What
 * the process still holds then is what it leaked, and the exit snapshot
 * must say so; so after the first allocation (the runtime is initialised by
 * then) we register a handler of our own, which therefore runs before the
 * runtime's, and from then on a context's end forgets nothing.
 *
 * Owners: an allocation belongs to the context current when it was made.
 * Processes that never call cuCtxCreate (every framework uses primary
 * contexts) pay nothing for that: owner 0 means "the primary context of its
 * device".  Created contexts get a number from `created` below, and while any
 * is alive each allocation asks the driver for the current context.
 *
 * Limitations: the last release is recognised by asking the driver, right
 * after it, whether the primary context is still active; a retain by another
 * thread in between hides it, and the memory stays counted until it is freed
 * or the context is reset.  Beyond RECORD_MAX_CONTEXTS live created contexts
 * the further ones are not numbered: their memory is not forgotten at their
 * destroy.  The pre-3.2 cuCtxCreate/cuCtxDestroy ABI is not wrapped.
 */
#include "hooks.h"

#include "clock.h"
#include "log.h"
#include "units.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED
#define NO_RUNTIME cudaErrorInsufficientDriver

static int exit_mark_registered;
static int exiting; /* set by mark_exiting: the process is ending */

static void mark_exiting(void)
{
    __atomic_store_n(&exiting, 1, __ATOMIC_RELAXED);
}

/* The driver destroyed context `ctx` (0: the primary context of `device`). */
static void destroyed(int device, unsigned ctx, const char *why)
{
    if (__atomic_load_n(&exiting, __ATOMIC_RELAXED))
        return; /* a teardown at exit: the memory stays reported as held */
    uint64_t bytes = record_drop_context(device, ctx, clock_now_ns());
    if (bytes != 0) {
        char b[32];
        LOG(LOG_DEBUG, "%s freed %s of GPU %d's context", why,
                units_format_bytes(bytes, b, sizeof b), device);
    }
}

/* ---- created contexts: slot n-1 holds context n ---- */

static struct {
    CUcontext ctx;
    int device;
} created[RECORD_MAX_CONTEXTS];
static pthread_mutex_t created_lock = PTHREAD_MUTEX_INITIALIZER;
static int ncreated; /* live created contexts; atomic reads on the hot path */
int hooks_context_plain; /* exit guard armed and ncreated == 0 (hooks.h) */

/* After the exit guard is armed or ncreated changed (under created_lock,
 * or once, from the first allocation). */
static void update_plain(void)
{
    __atomic_store_n(&hooks_context_plain,
                     __atomic_load_n(&exit_mark_registered, __ATOMIC_RELAXED) &&
                         __atomic_load_n(&ncreated, __ATOMIC_RELAXED) == 0,
                     __ATOMIC_RELAXED);
}

/* Under created_lock: the number of ctx, 0 when not ours. */
static unsigned created_find(CUcontext ctx)
{
    for (unsigned i = 0; i < RECORD_MAX_CONTEXTS; i++)
        if (created[i].ctx == ctx)
            return i + 1;
    return 0;
}

unsigned hooks_context_owner(void)
{
    if (__builtin_expect(!__atomic_load_n(&exit_mark_registered, __ATOMIC_RELAXED), 0) &&
        !__atomic_exchange_n(&exit_mark_registered, 1, __ATOMIC_ACQ_REL)) {
        atexit(mark_exiting);
        pthread_mutex_lock(&created_lock);
        update_plain();
        pthread_mutex_unlock(&created_lock);
    }
    if (__builtin_expect(__atomic_load_n(&ncreated, __ATOMIC_RELAXED) == 0, 1))
        return 0;
    PFN(cuCtxGetCurrent) get = REAL(cuCtxGetCurrent);
    CUcontext ctx = NULL;
    if (get == NULL || get(&ctx) != CUDA_SUCCESS || ctx == NULL)
        return 0;
    pthread_mutex_lock(&created_lock);
    unsigned n = created_find(ctx);
    pthread_mutex_unlock(&created_lock);
    return n;
}

void hooks_context_atfork_child(void)
{
    memset(created, 0, sizeof created);
    ncreated = 0;
    pthread_mutex_init(&created_lock, NULL);
    update_plain();
}

static CUresult after_create(CUresult r, CUcontext *pctx, CUdevice dev)
{
    hooks_device_changed(false); /* the new context is current now */
    if (hook_enter() && r == CUDA_SUCCESS && pctx != NULL && *pctx != NULL) {
        pthread_mutex_lock(&created_lock);
        unsigned n = created_find(*pctx); /* a reused address: the old one is gone */
        if (n == 0 && (n = created_find(NULL)) != 0) {
            __atomic_add_fetch(&ncreated, 1, __ATOMIC_RELAXED);
            update_plain();
        }
        if (n != 0) {
            created[n - 1].ctx = *pctx;
            created[n - 1].device = dev;
        }
        pthread_mutex_unlock(&created_lock);
    }
    hook_leave();
    return r;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    PFN(cuCtxCreate_v2) real = REAL(cuCtxCreate_v2);
    return real == NULL ? NO_DRIVER : after_create(real(pctx, flags, dev), pctx, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, struct CUexecAffinityParam_st *paramsArray,
                        int numParams, unsigned int flags, CUdevice dev)
{
    PFN(cuCtxCreate_v3) real = REAL(cuCtxCreate_v3);
    return real == NULL ? NO_DRIVER
                        : after_create(real(pctx, paramsArray, numParams, flags, dev),
                                       pctx, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, struct CUctxCreateParams_st *ctxCreateParams,
                        unsigned int flags, CUdevice dev)
{
    PFN(cuCtxCreate_v4) real = REAL(cuCtxCreate_v4);
    return real == NULL ? NO_DRIVER
                        : after_create(real(pctx, ctxCreateParams, flags, dev), pctx, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    PFN(cuCtxDestroy_v2) real = REAL(cuCtxDestroy_v2);
    if (real == NULL)
        return NO_DRIVER;
    CUresult r = real(ctx);
    hooks_device_changed(true); /* it may have been current anywhere */
    if (hook_enter() && r == CUDA_SUCCESS && ctx != NULL) {
        pthread_mutex_lock(&created_lock);
        unsigned n = created_find(ctx);
        int dev = n ? created[n - 1].device : 0;
        pthread_mutex_unlock(&created_lock);
        if (n != 0) {
            /* forget its memory before the number can be handed out again */
            destroyed(dev, n, "cuCtxDestroy");
            pthread_mutex_lock(&created_lock);
            created[n - 1].ctx = NULL;
            __atomic_sub_fetch(&ncreated, 1, __ATOMIC_RELAXED);
            update_plain();
            pthread_mutex_unlock(&created_lock);
        }
    }
    hook_leave();
    return r;
}

/* ---- primary contexts ---- */

static CUresult after_reset(CUresult r, CUdevice dev, const char *why)
{
    hooks_device_changed(true);
    if (hook_enter() && r == CUDA_SUCCESS)
        destroyed(dev, 0, why);
    hook_leave();
    return r;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    PFN(cuDevicePrimaryCtxReset_v2) real = REAL(cuDevicePrimaryCtxReset_v2);
    return real == NULL ? NO_DRIVER
                        : after_reset(real(dev), dev, "cuDevicePrimaryCtxReset");
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    PFN(cuDevicePrimaryCtxReset) real = REAL(cuDevicePrimaryCtxReset);
    return real == NULL ? NO_DRIVER
                        : after_reset(real(dev), dev, "cuDevicePrimaryCtxReset");
}

/* A release destroys the context only when it dropped the last reference. */
static CUresult after_release(CUresult r, CUdevice dev)
{
    hooks_device_changed(true);
    if (hook_enter() && r == CUDA_SUCCESS) {
        PFN(cuDevicePrimaryCtxGetState) state = REAL(cuDevicePrimaryCtxGetState);
        unsigned int flags;
        int active = 1;
        if (state != NULL && state(dev, &flags, &active) == CUDA_SUCCESS && !active)
            destroyed(dev, 0, "the last cuDevicePrimaryCtxRelease");
    }
    hook_leave();
    return r;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    PFN(cuDevicePrimaryCtxRelease_v2) real = REAL(cuDevicePrimaryCtxRelease_v2);
    return real == NULL ? NO_DRIVER : after_release(real(dev), dev);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    PFN(cuDevicePrimaryCtxRelease) real = REAL(cuDevicePrimaryCtxRelease);
    return real == NULL ? NO_DRIVER : after_release(real(dev), dev);
}

/* The runtime's reset, for runtimes that reach the driver by a way we do not
 * see (the device is the one current before the call). */
cudaError_t cudaDeviceReset(void)
{
    PFN(cudaDeviceReset) real = REAL(cudaDeviceReset);
    if (real == NULL)
        return NO_RUNTIME;
    bool traced = hook_enter();
    int dev = traced ? hooks_runtime_device() : 0;
    cudaError_t r = real();
    hooks_device_changed(true);
    if (traced && r == cudaSuccess)
        destroyed(dev, 0, "cudaDeviceReset");
    hook_leave();
    return r;
}

/* ---- switching the current context or device ----
 * Nothing to record: each forgets this thread's cached device (hooks.h)
 * once the real call has switched, whatever it returned, nested or not
 * (the runtime's cudaSetDevice reaches cuCtxSetCurrent through us too). */

#define SWITCH(ret_t, no_real, sym, params, args) \
    ret_t sym params                              \
    {                                             \
        PFN(sym) real = REAL(sym);                \
        if (real == NULL)                         \
            return no_real;                       \
        ret_t r = real args;                      \
        hooks_device_changed(false);              \
        return r;                                 \
    }

SWITCH(CUresult, NO_DRIVER, cuCtxSetCurrent, (CUcontext ctx), (ctx))
SWITCH(CUresult, NO_DRIVER, cuCtxPushCurrent, (CUcontext ctx), (ctx))
SWITCH(CUresult, NO_DRIVER, cuCtxPushCurrent_v2, (CUcontext ctx), (ctx))
SWITCH(CUresult, NO_DRIVER, cuCtxPopCurrent, (CUcontext *pctx), (pctx))
SWITCH(CUresult, NO_DRIVER, cuCtxPopCurrent_v2, (CUcontext *pctx), (pctx))
SWITCH(cudaError_t, NO_RUNTIME, cudaSetDevice, (int device), (device))
