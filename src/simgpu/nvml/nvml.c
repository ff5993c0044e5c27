/* nvml.c - the simulated libnvidia-ml.so.1: the NVML functions PyTorch
 * (2.15) resolves, answering for the simulated devices.
 *
 * Why there is one: PyTorch looks NVML up when it loads (c10's DriverAPI;
 * without the library it leaves the pointers NULL), and with
 * PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True its first segment asks
 * get_fabric_access(), which calls nvmlInit_v2 and
 * nvmlDeviceGetHandleByPciBusId_v2 without checking that they exist - a
 * process without NVML dies of SIGSEGV there.  Every NVIDIA driver install
 * has NVML, so the simulated GPU has one too.  When the library is present,
 * PyTorch requires all of its NVML functions to be there; this file
 * defines exactly the names the wheel's libraries contain.
 *
 * What it says: SIMCUDA_DEVICES devices (as the simulated driver), found
 * by index, by the PCI bus id cudaDeviceGetPCIBusId reports
 * ("0000:%02x:00.0", bus 0x18 + ordinal) and by UUID; no fabric (state
 * NOT_SUPPORTED: PyTorch then exchanges POSIX file descriptors), no
 * NVLink, no P2P, and no process list (the simulator does not know which
 * processes use a device: 0 processes).  Driver version: CUDA 13.0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_common.h"

#define SPEAKER "simnvml"
#define MAX_DEVICES 16
#define PCI_BUS_BASE 0x18 /* driver_device.c: CU_DEVICE_ATTRIBUTE_PCI_BUS_ID */

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_VERSION_MISMATCH = 25,
};

struct nvmlDevice_st {
    unsigned int index;
};
typedef struct nvmlDevice_st *nvmlDevice_t;

/* nvmlGpuFabricInfo_v2_t / _v3_t share this head (nvml.h). */
struct fabric_info_head {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state; /* NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0 */
    unsigned int healthMask;
};

static struct nvmlDevice_st devices[MAX_DEVICES];
static int initialized;

static unsigned int device_count(void)
{
    return (unsigned int)sim_common_env_long(SPEAKER, "SIMCUDA_DEVICES", 1, 0, MAX_DEVICES);
}

static int valid(nvmlDevice_t d)
{
    return d >= devices && d < devices + device_count();
}

/* "GPU-" and the simulated driver's UUID bytes (cuDeviceGetUuid_v2). */
static void uuid_of(unsigned int index, char *out, size_t len)
{
    unsigned char b[16];
    memcpy(b, "simcuda-device\0", 16);
    b[15] = (unsigned char)index;
    snprintf(out, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

#define API __attribute__((visibility("default")))

API nvmlReturn_t nvmlInit_v2(void)
{
    for (unsigned int i = 0; i < MAX_DEVICES; i++)
        devices[i].index = i;
    initialized = 1;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlShutdown(void)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    initialized = 0;
    return NVML_SUCCESS;
}

API const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_VERSION_MISMATCH: return "Version Mismatch";
    default: return "Unknown Error";
    }
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    if (cudaDriverVersion == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = 13000;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (deviceCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = device_count();
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= device_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    unsigned int domain, bus, dev;
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (pciBusId == NULL || device == NULL ||
        sscanf(pciBusId, "%x:%x:%x", &domain, &bus, &dev) != 3)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (domain != 0 || dev != 0 || bus < PCI_BUS_BASE || bus - PCI_BUS_BASE >= device_count())
        return NVML_ERROR_NOT_FOUND;
    *device = &devices[bus - PCI_BUS_BASE];
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (uuid == NULL || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < device_count(); i++) {
        char u[96];
        uuid_of(i, u, sizeof u);
        if (strcmp(u, uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    char u[96];
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(device) || uuid == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    uuid_of(device->index, u, sizeof u);
    if (strlen(u) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(uuid, u, strlen(u) + 1);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *gpuFabricInfo)
{
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(device) || gpuFabricInfo == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fabric_info_head *info = gpuFabricInfo;
    unsigned int struct_version = info->version >> 24; /* NVML_STRUCT_VERSION */
    if (struct_version != 2 && struct_version != 3)
        return NVML_ERROR_VERSION_MISMATCH;
    unsigned int version = info->version;
    memset(info, 0, sizeof *info); /* state NOT_SUPPORTED, status SUCCESS */
    info->version = version;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                     int *pNvLinkDeviceType)
{
    (void)link, (void)pNvLinkDeviceType;
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    return valid(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                     void *pci)
{
    (void)link, (void)pci;
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    return valid(device) ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex,
                                        int *p2pStatus)
{
    (void)p2pIndex, (void)p2pStatus;
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    return valid(device1) && valid(device2) ? NVML_ERROR_NOT_SUPPORTED
                                            : NVML_ERROR_INVALID_ARGUMENT;
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                      void *infos)
{
    (void)infos;
    if (!initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(device) || infoCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *infoCount = 0;
    return NVML_SUCCESS;
}
