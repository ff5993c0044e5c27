/* runtime_device.c - what the simulated runtime says about devices and
 * pointers: cudaGetDeviceProperties (CUDA 13 layout, filled from the
 * driver's cuDeviceGetAttribute, cuDeviceGetName, cuDeviceTotalMem and
 * cuDeviceGetUuid, as NVIDIA's runtime does), cudaDeviceGetAttribute (the
 * runtime's attributes have the driver's numbers), PCI ids, peer access
 * (none: every simulated device is its own board), stream priorities, and
 * cudaPointerGetAttributes (device memory by address window, page-locked
 * host memory by runtime_pinned.c's ranges; every other pointer is
 * unregistered host memory - managed memory is not told apart).  The profiler calls are accepted and do nothing.
 */
#include "runtime.h"

#include <stdio.h>
#include <string.h>

#include "sim_common.h"

/* The CUDA 13 runtime's stream priorities: 0 is the lowest. */
#define LEAST_PRIORITY 0
#define GREATEST_PRIORITY (-5)

static cudaError_t attribute(int *v, CUdevice_attribute a, int dev)
{
    return RUNTIME_DRIVER(runtime_drv.cuDeviceGetAttribute, (v, a, dev));
}

/* The fields libraries read; the rest stay 0 (capabilities the simulated
 * device does not have, or texture limits nothing here uses). */
static cudaError_t fill_properties(struct cudaDeviceProp *p, int dev)
{
    static const struct {
        size_t offset, size;
        CUdevice_attribute attr;
    } fields[] = {
#define F(field, attr) {offsetof(struct cudaDeviceProp, field), \
                        sizeof(((struct cudaDeviceProp *)0)->field), CU_DEVICE_ATTRIBUTE_##attr}
        F(sharedMemPerBlock, MAX_SHARED_MEMORY_PER_BLOCK),
        F(regsPerBlock, MAX_REGISTERS_PER_BLOCK),
        F(warpSize, WARP_SIZE),
        F(memPitch, MAX_PITCH),
        F(maxThreadsPerBlock, MAX_THREADS_PER_BLOCK),
        F(maxThreadsDim[0], MAX_BLOCK_DIM_X),
        F(maxThreadsDim[1], MAX_BLOCK_DIM_Y),
        F(maxThreadsDim[2], MAX_BLOCK_DIM_Z),
        F(maxGridSize[0], MAX_GRID_DIM_X),
        F(maxGridSize[1], MAX_GRID_DIM_Y),
        F(maxGridSize[2], MAX_GRID_DIM_Z),
        F(totalConstMem, TOTAL_CONSTANT_MEMORY),
        F(major, COMPUTE_CAPABILITY_MAJOR),
        F(minor, COMPUTE_CAPABILITY_MINOR),
        F(textureAlignment, TEXTURE_ALIGNMENT),
        F(texturePitchAlignment, TEXTURE_PITCH_ALIGNMENT),
        F(multiProcessorCount, MULTIPROCESSOR_COUNT),
        F(integrated, INTEGRATED),
        F(canMapHostMemory, CAN_MAP_HOST_MEMORY),
        F(surfaceAlignment, SURFACE_ALIGNMENT),
        F(concurrentKernels, CONCURRENT_KERNELS),
        F(ECCEnabled, ECC_ENABLED),
        F(pciBusID, PCI_BUS_ID),
        F(pciDeviceID, PCI_DEVICE_ID),
        F(pciDomainID, PCI_DOMAIN_ID),
        F(asyncEngineCount, ASYNC_ENGINE_COUNT),
        F(unifiedAddressing, UNIFIED_ADDRESSING),
        F(memoryBusWidth, GLOBAL_MEMORY_BUS_WIDTH),
        F(l2CacheSize, L2_CACHE_SIZE),
        F(persistingL2CacheMaxSize, MAX_PERSISTING_L2_CACHE_SIZE),
        F(maxThreadsPerMultiProcessor, MAX_THREADS_PER_MULTIPROCESSOR),
        F(streamPrioritiesSupported, STREAM_PRIORITIES_SUPPORTED),
        F(globalL1CacheSupported, GLOBAL_L1_CACHE_SUPPORTED),
        F(localL1CacheSupported, LOCAL_L1_CACHE_SUPPORTED),
        F(sharedMemPerMultiprocessor, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        F(regsPerMultiprocessor, MAX_REGISTERS_PER_MULTIPROCESSOR),
        F(managedMemory, MANAGED_MEMORY),
        F(hostNativeAtomicSupported, HOST_NATIVE_ATOMIC_SUPPORTED),
        F(concurrentManagedAccess, CONCURRENT_MANAGED_ACCESS),
        F(computePreemptionSupported, COMPUTE_PREEMPTION_SUPPORTED),
        F(canUseHostPointerForRegisteredMem, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM),
        F(cooperativeLaunch, COOPERATIVE_LAUNCH),
        F(sharedMemPerBlockOptin, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        F(maxBlocksPerMultiProcessor, MAX_BLOCKS_PER_MULTIPROCESSOR),
        F(accessPolicyMaxWindowSize, MAX_ACCESS_POLICY_WINDOW_SIZE),
        F(reservedSharedMemPerBlock, RESERVED_SHARED_MEMORY_PER_BLOCK),
        F(hostRegisterSupported, HOST_REGISTER_SUPPORTED),
        F(memoryPoolsSupported, MEMORY_POOLS_SUPPORTED),
        F(memoryPoolSupportedHandleTypes, MEMPOOL_SUPPORTED_HANDLE_TYPES),
        F(clusterLaunch, CLUSTER_LAUNCH),
        F(ipcEventSupported, IPC_EVENT_SUPPORTED),
#undef F
    };
    memset(p, 0, sizeof *p);
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && e == cudaSuccess; i++) {
        int v = 0;
        e = attribute(&v, fields[i].attr, dev);
        if (e != cudaSuccess)
            break;
        char *at = (char *)p + fields[i].offset;
        if (fields[i].size == sizeof(size_t)) {
            size_t z = (size_t)(unsigned int)v;
            memcpy(at, &z, sizeof z);
        } else {
            memcpy(at, &v, sizeof v);
        }
    }
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuDeviceGetName, (p->name, (int)sizeof p->name, dev));
    if (e == cudaSuccess)
        e = RUNTIME_DRIVER(runtime_drv.cuDeviceTotalMem_v2, (&p->totalGlobalMem, dev));
    if (e == cudaSuccess && runtime_drv.cuDeviceGetUuid_v2 != NULL)
        e = runtime_result(runtime_drv.cuDeviceGetUuid_v2(&p->uuid, dev));
    return e;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    RUNTIME_ENTER(cudaGetDeviceProperties);
    cudaError_t e = prop == NULL ? cudaErrorInvalidValue : runtime_check_device(device);
    if (e == cudaSuccess)
        e = fill_properties(prop, device);
    return runtime_leave(RSYM_cudaGetDeviceProperties, e, "(%d)", device);
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    RUNTIME_ENTER(cudaDeviceGetAttribute);
    cudaError_t e = value == NULL ? cudaErrorInvalidValue : runtime_check_device(device);
    if (e == cudaSuccess)
        e = attribute(value, (CUdevice_attribute)attr, device);
    return runtime_leave(RSYM_cudaDeviceGetAttribute, e, "(%d, %d) -> %d", (int)attr, device,
                         e == cudaSuccess ? *value : 0);
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    RUNTIME_ENTER(cudaDeviceGetPCIBusId);
    cudaError_t e =
        pciBusId == NULL || len <= 0 ? cudaErrorInvalidValue : runtime_check_device(device);
    int bus = 0;
    if (e == cudaSuccess)
        e = attribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device);
    if (e == cudaSuccess)
        snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", (unsigned)bus);
    return runtime_leave(RSYM_cudaDeviceGetPCIBusId, e, "(%d)", device);
}

cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    RUNTIME_ENTER(cudaDeviceCanAccessPeer);
    cudaError_t e = canAccessPeer == NULL ? cudaErrorInvalidValue : runtime_check_device(device);
    if (e == cudaSuccess)
        e = runtime_check_device(peerDevice);
    if (e == cudaSuccess)
        *canAccessPeer = 0;
    return runtime_leave(RSYM_cudaDeviceCanAccessPeer, e, "(%d, %d)", device, peerDevice);
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    RUNTIME_ENTER(cudaDeviceEnablePeerAccess);
    cudaError_t e = flags != 0 ? cudaErrorInvalidValue : runtime_check_device(peerDevice);
    if (e == cudaSuccess)
        e = cudaErrorPeerAccessUnsupported;
    return runtime_leave(RSYM_cudaDeviceEnablePeerAccess, e, "(%d)", peerDevice);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    RUNTIME_ENTER(cudaDeviceGetStreamPriorityRange);
    if (leastPriority != NULL)
        *leastPriority = LEAST_PRIORITY;
    if (greatestPriority != NULL)
        *greatestPriority = GREATEST_PRIORITY;
    return runtime_leave(RSYM_cudaDeviceGetStreamPriorityRange, cudaSuccess, "()");
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    RUNTIME_ENTER(cudaPointerGetAttributes);
    cudaError_t e = attributes == NULL ? cudaErrorInvalidValue : runtime_ready();
    if (e == cudaSuccess) {
        memset(attributes, 0, sizeof *attributes);
        if (runtime_device_only(ptr)) {
            uint64_t a = (uint64_t)(uintptr_t)ptr;
            attributes->type = cudaMemoryTypeDevice;
            attributes->device = (int)((a - SIM_DEVICE_WINDOW_BASE) / UINT64_C(0x10000000000));
            attributes->devicePointer = (void *)ptr;
        } else if (runtime_pinned(ptr)) {
            /* unified addressing: the device sees it at the same address */
            attributes->type = cudaMemoryTypeHost;
            attributes->device = runtime_current_device();
            attributes->devicePointer = (void *)ptr;
            attributes->hostPointer = (void *)ptr;
        } else {
            attributes->type = cudaMemoryTypeUnregistered;
            attributes->device = -1; /* no device holds it */
        }
    }
    return runtime_leave(RSYM_cudaPointerGetAttributes, e, "(%p)", ptr);
}

/* cuda_profiler_api.h: not in the checked headers (tests/abi/). */
cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);

RUNTIME_CALL(cudaProfilerStart, (void), cudaSuccess, "()")
RUNTIME_CALL(cudaProfilerStop, (void), cudaSuccess, "()")
