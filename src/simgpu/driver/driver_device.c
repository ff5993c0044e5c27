/* driver_device.c - what a simulated device says about itself
 * (cuDeviceGetAttribute, cuDeviceGetUuid_v2) and the stream memory
 * operations PyTorch's c10/cuda/driver_api.h requires (cuMemsetD32Async,
 * cuStreamWriteValue32_v2), which complete at once and touch nothing: device
 * memory has no storage the driver could write to.
 *
 * The device is H100-like (compute capability 9.0, 132 SMs) so that
 * libraries pick their ordinary code paths, unless SIMCUDA_CC and
 * SIMCUDA_SMS say otherwise (driver.c; scripts/simgpu --gpu).  Every attribute number below
 * CU_DEVICE_ATTRIBUTE_MAX has a value, as on NVIDIA's driver; those not in
 * the table are capabilities the device does not have (0).  No
 * fabric handles, no multicast: PyTorch then uses POSIX file descriptors
 * and no symmetric memory.
 */
#include "driver_impl.h"

#include <string.h>

static const struct {
    CUdevice_attribute attr;
    int value;
} attributes[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
    {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000},
    {CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512},
    {CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, 512},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1},
    {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
    {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 32},
    {CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1},
    {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
    {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 41943040},
    {CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632},
    {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR},
    {CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1},
    {CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 1},
    {CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 1},
};

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    DRIVER_ENTER(cuDeviceGetAttribute);
    CUresult r = driver_check_device_args(dev, pi == NULL || attrib < 1 ||
                                                   attrib >= CU_DEVICE_ATTRIBUTE_MAX);
    if (r == CUDA_SUCCESS) {
        *pi = 0;
        for (size_t i = 0; i < sizeof attributes / sizeof attributes[0]; i++)
            if (attributes[i].attr == attrib)
                *pi = attributes[i].value;
        if (attrib == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            *pi = driver.id.cc_major;
        if (attrib == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            *pi = driver.id.cc_minor;
        if (attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            *pi = driver.id.sms;
        if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
            *pi = 0x18 + dev; /* distinct per device, as cudaDeviceGetPCIBusId shows */
    }
    return driver_leave(SYM_cuDeviceGetAttribute, r, "(%d, %d) -> %d", (int)attrib, dev,
                        r == CUDA_SUCCESS ? *pi : 0);
}

/* A fixed UUID per ordinal, so that it is stable across processes. */
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    DRIVER_ENTER(cuDeviceGetUuid_v2);
    CUresult r = driver_check_device_args(dev, uuid == NULL);
    if (r == CUDA_SUCCESS) {
        memcpy(uuid->bytes, "simcuda-device\0", 16);
        uuid->bytes[15] = (char)dev;
    }
    return driver_leave(SYM_cuDeviceGetUuid_v2, r, "(%d)", dev);
}

DRIVER_CALL(cuMemsetD32Async,
            (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream),
            driver_ready_args(dstDevice % 4 != 0), "(0x%llx, %u, %zu, %p)", dstDevice, ui, N,
            (void *)hStream)
DRIVER_CALL(cuStreamWriteValue32_v2,
            (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),
            driver_ready_args(addr % 4 != 0), "(%p, 0x%llx, %u, %u)", (void *)stream, addr,
            value, flags)
