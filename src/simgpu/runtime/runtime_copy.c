/* runtime_copy.c - copies, memsets, host registration and IPC of the
 * simulated runtime.
 *
 * Device memory has no storage of its own (its addresses are in the windows
 * of runtime_device_only), so a copy is judged by where each side is, not by
 * its cudaMemcpyKind (which is only checked for range, as UVA makes
 * cudaMemcpyDefault the usual kind): what a copy or memset writes into device
 * memory is kept by runtime_backing.c (bounded) and a copy out of device
 * memory reads it back, zeros where nothing was kept (what kernels, which
 * compute nothing, "wrote"); host to host copies for real (managed and
 * pinned memory are host memory here).  Memsets of host-visible memory set it.
 * Stream-ordered variants complete before they return.
 *
 * Host registration is accepted (the memory is already host memory); IPC
 * handles are cudaErrorNotSupported: no other process can map simulated
 * device memory.
 */
#include "runtime.h"

#include <string.h>

static cudaError_t copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if ((unsigned)kind > cudaMemcpyDefault)
        return cudaErrorInvalidValue;
    cudaError_t e = runtime_context();
    if (e != cudaSuccess || count == 0)
        return e;
    if (dst == NULL || src == NULL)
        return cudaErrorInvalidValue;
    int to_device = runtime_device_only(dst), from_device = runtime_device_only(src);
    if (to_device && from_device)
        runtime_backing_copy((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, count);
    else if (to_device)
        runtime_backing_write((uint64_t)(uintptr_t)dst, src, count);
    else if (from_device)
        runtime_backing_read(dst, (uint64_t)(uintptr_t)src, count);
    else
        memmove(dst, src, count);
    return cudaSuccess;
}

RUNTIME_CALL(cudaMemcpy, (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),
             copy(dst, src, count, kind), "(%p, %p, %zu, %d)", dst, src, count, (int)kind)

RUNTIME_CALL(cudaMemcpyAsync,
             (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
              cudaStream_t stream),
             copy(dst, src, count, kind), "(%p, %p, %zu, %d, %p)", dst, src, count, (int)kind,
             (void *)stream)

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    RUNTIME_ENTER(cudaMemcpy2DAsync);
    cudaError_t e = width > dpitch || width > spitch ? cudaErrorInvalidValue : cudaSuccess;
    for (size_t row = 0; row < height && e == cudaSuccess; row++)
        e = copy((char *)dst + row * dpitch, (const char *)src + row * spitch, width, kind);
    if (height == 0 && e == cudaSuccess)
        e = copy(dst, src, 0, kind);
    return runtime_leave(RSYM_cudaMemcpy2DAsync, e, "(%p, %p, %zu x %zu, %p)", dst, src, width,
                         height, (void *)stream);
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                size_t count, cudaStream_t stream)
{
    RUNTIME_ENTER(cudaMemcpyPeerAsync);
    cudaError_t e = runtime_ready();
    if (e == cudaSuccess && (!runtime_valid_device(dstDevice) || !runtime_valid_device(srcDevice)))
        e = cudaErrorInvalidDevice;
    if (e == cudaSuccess)
        e = copy(dst, src, count, cudaMemcpyDeviceToDevice);
    return runtime_leave(RSYM_cudaMemcpyPeerAsync, e, "(%p, %d, %p, %d, %zu, %p)", dst,
                         dstDevice, src, srcDevice, count, (void *)stream);
}

static cudaError_t set(void *p, int value, size_t count)
{
    cudaError_t e = runtime_context();
    if (e == cudaSuccess && count > 0) {
        if (p == NULL)
            return cudaErrorInvalidValue;
        if (runtime_device_only(p))
            runtime_backing_fill((uint64_t)(uintptr_t)p, value, count);
        else
            memset(p, value, count);
    }
    return e;
}

RUNTIME_CALL(cudaMemset, (void *devPtr, int value, size_t count), set(devPtr, value, count),
             "(%p, %d, %zu)", devPtr, value, count)
RUNTIME_CALL(cudaMemsetAsync, (void *devPtr, int value, size_t count, cudaStream_t stream),
             set(devPtr, value, count), "(%p, %d, %zu, %p)", devPtr, value, count, (void *)stream)

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    RUNTIME_ENTER(cudaHostRegister);
    cudaError_t e = ptr == NULL || size == 0 || runtime_device_only(ptr) ? cudaErrorInvalidValue
                                                                         : runtime_context();
    if (e == cudaSuccess)
        runtime_pinned_add(ptr, size);
    return runtime_leave(RSYM_cudaHostRegister, e, "(%p, %zu, %u)", ptr, size, flags);
}

cudaError_t cudaHostUnregister(void *ptr)
{
    RUNTIME_ENTER(cudaHostUnregister);
    cudaError_t e = ptr == NULL ? cudaErrorInvalidValue : runtime_context();
    if (e == cudaSuccess)
        runtime_pinned_remove(ptr);
    return runtime_leave(RSYM_cudaHostUnregister, e, "(%p)", ptr);
}

#define NO_IPC "IPC is not simulated"
RUNTIME_REFUSED(NO_IPC, cudaIpcGetMemHandle, (cudaIpcMemHandle_t *handle, void *devPtr))
RUNTIME_REFUSED(NO_IPC, cudaIpcOpenMemHandle,
                (void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags))
RUNTIME_REFUSED(NO_IPC, cudaIpcCloseMemHandle, (void *devPtr))
RUNTIME_REFUSED(NO_IPC, cudaIpcGetEventHandle, (cudaIpcEventHandle_t *handle, cudaEvent_t event))
RUNTIME_REFUSED(NO_IPC, cudaIpcOpenEventHandle, (cudaEvent_t *event, cudaIpcEventHandle_t handle))
