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
 * Owners: an allocation belongs to the context current when it was made;
 * the table of created contexts that tells it is hooks_context_owner.c's.
 *
 * Limitations: the last release is recognised by asking the driver, right
 * after it, whether the primary context is still active; a retain by another
 * thread in between hides it, and the memory stays counted until it is freed
 * or the context is reset.  Beyond RECORD_MAX_CONTEXTS live created contexts
 * the further ones share one owner, and their destroy forgets their memory
 * by address (hooks_context_owner.c).  The pre-3.2 cuCtxCreate/cuCtxDestroy
 * ABI is not wrapped.
 */
#include "hooks.h"

#include "clock.h"
#include "log.h"
#include "units.h"

#include <stdlib.h>

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED
#define NO_RUNTIME cudaErrorInsufficientDriver

/* The driver destroyed context `ctx` (0: the primary context of `device`). */
static void destroyed(int device, unsigned ctx, const char *why)
{
    if (hooks_context_exiting())
        return; /* a teardown at exit: the memory stays reported as held */
    uint64_t bytes = record_drop_context(device, ctx, clock_now_ns());
    if (bytes != 0) {
        char b[32];
        LOG(LOG_DEBUG, "%s freed %s of GPU %d's context", why,
                units_format_bytes(bytes, b, sizeof b), device);
    }
}

/* A driver entry point whose real call is followed by after(its result,
 * ...): one row per version of the same call. */
#define THEN(sym, params, args, after, ...)                                 \
    CUresult sym params                                                     \
    {                                                                       \
        PFN(sym) real = REAL(sym);                                          \
        return real == NULL ? NO_DRIVER : after(real args, __VA_ARGS__);  \
    }

static CUresult after_create(CUresult r, CUcontext *pctx, CUdevice dev)
{
    hooks_device_changed(false); /* the new context is current now */
    if (hook_enter() && r == CUDA_SUCCESS && pctx != NULL && *pctx != NULL)
        hooks_context_add(*pctx, dev);
    hook_leave();
    return r;
}

THEN(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev),
     after_create, pctx, dev)
THEN(cuCtxCreate_v3, (CUcontext *pctx, struct CUexecAffinityParam_st *paramsArray,
                      int numParams, unsigned int flags, CUdevice dev),
     (pctx, paramsArray, numParams, flags, dev), after_create, pctx, dev)
THEN(cuCtxCreate_v4, (CUcontext *pctx, struct CUctxCreateParams_st *ctxCreateParams,
                      unsigned int flags, CUdevice dev),
     (pctx, ctxCreateParams, flags, dev), after_create, pctx, dev)

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    PFN(cuCtxDestroy_v2) real = REAL(cuCtxDestroy_v2);
    if (real == NULL)
        return NO_DRIVER;
    CUresult r = real(ctx);
    hooks_device_changed(true); /* it may have been current anywhere */
    if (hook_enter() && r == CUDA_SUCCESS && ctx != NULL) {
        int dev = 0;
        unsigned n = hooks_context_find(ctx, &dev);
        if (n == RECORD_CONTEXT_OVERFLOW) {
            struct record_owned *v;
            size_t nv;
            hooks_context_remove_overflow(ctx, &v, &nv);
            if (!hooks_context_exiting())
                record_drop_entries(v, nv, clock_now_ns());
            free(v);
        } else if (n != 0) {
            /* forget its memory before the number can be handed out again */
            destroyed(dev, n, "cuCtxDestroy");
            hooks_context_remove(n);
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

THEN(cuDevicePrimaryCtxReset_v2, (CUdevice dev), (dev), after_reset, dev,
     "cuDevicePrimaryCtxReset")
THEN(cuDevicePrimaryCtxReset, (CUdevice dev), (dev), after_reset, dev, "cuDevicePrimaryCtxReset")

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

THEN(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), (dev), after_release, dev)
THEN(cuDevicePrimaryCtxRelease, (CUdevice dev), (dev), after_release, dev)

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
