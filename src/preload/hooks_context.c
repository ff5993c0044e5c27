/* hooks_context.c - context lifetimes: what the driver frees when a context
 * goes, so the snapshot and CUMEMTRACE_LIMIT stop counting it.
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
 * Limitations: the last release is recognised by asking the driver, right
 * after it, whether the primary context is still active; a retain by another
 * thread in between hides it, and the memory stays counted until it is freed
 * or the context is reset.
 */
#include "hooks.h"

#include "clock.h"
#include "log.h"
#include "units.h"

#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED
#define NO_RUNTIME cudaErrorInsufficientDriver

/* The driver destroyed context `ctx` (0: the primary context of `device`). */
static void destroyed(int device, unsigned ctx, const char *why)
{
    uint64_t bytes = record_drop_context(device, ctx, clock_now_ns());
    if (bytes != 0) {
        char b[32];
        LOG(LOG_DEBUG, "%s freed %s of GPU %d's context", why,
                units_format_bytes(bytes, b, sizeof b), device);
    }
}

/* ---- primary contexts ---- */

static CUresult after_reset(CUresult r, CUdevice dev, const char *why)
{
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
    if (traced && r == cudaSuccess)
        destroyed(dev, 0, "cudaDeviceReset");
    hook_leave();
    return r;
}
