/* cuda_types.h - the CUDA driver and runtime types cumemtrace relies on.
 *
 * We declare the ABI ourselves so the build never needs the CUDA toolkit.
 * Every value and layout here is checked against NVIDIA's cuda.h and
 * cuda_runtime_api.h by tests/abi/ whenever a toolkit is installed, so these
 * declarations cannot drift silently.  Only what we wrap or simulate is here.
 */
#ifndef CUMEMTRACE_CUDA_TYPES_H
#define CUMEMTRACE_CUDA_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* ---- driver API (cuda.h) ---- */

typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_NOT_MAPPED = 211,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef unsigned long long CUdeviceptr_v2;
typedef CUdeviceptr_v2 CUdeviceptr;
typedef unsigned int CUdeviceptr_v1; /* the pre-3.2 32-bit ABI */
typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
/* cuCtxCreate_v3/_v4 parameters (execution affinity, CIG): only passed on,
 * so opaque here (NVIDIA's CUexecAffinityParam, CUctxCreateParams). */
struct CUexecAffinityParam_st;
struct CUctxCreateParams_st;
typedef unsigned long long CUmemGenericAllocationHandle_v1;
typedef CUmemGenericAllocationHandle_v1 CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;

typedef enum CUdriverProcAddress_flags_enum {
    CU_GET_PROC_ADDRESS_DEFAULT = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1
} CUdriverProcAddress_flags;

typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0x0,
    CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
    CU_MEM_LOCATION_TYPE_HOST = 0x2,
    CU_MEM_LOCATION_TYPE_HOST_NUMA = 0x3,
    CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 0x4,
    CU_MEM_LOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemLocationType;

typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
    CU_MEM_ALLOCATION_TYPE_MANAGED = 0x2,
    CU_MEM_ALLOCATION_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0x0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
    CU_MEM_HANDLE_TYPE_FABRIC = 0x8,
    CU_MEM_HANDLE_TYPE_MAX = 0x7FFFFFFF
} CUmemAllocationHandleType;

typedef enum CUmemAccess_flags_enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
    CU_MEM_ACCESS_FLAGS_PROT_MAX = 0x7FFFFFFF
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1
} CUmemAllocationGranularity_flags;

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation_v1;
typedef CUmemLocation_v1 CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp_v1;
typedef CUmemAllocationProp_v1 CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    CUmemAccess_flags flags;
} CUmemAccessDesc_v1;
typedef CUmemAccessDesc_v1 CUmemAccessDesc;

typedef struct CUmemPoolProps_st {
    CUmemAllocationType allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps_v1;
typedef CUmemPoolProps_v1 CUmemPoolProps;

typedef enum CUmemPool_attribute_enum {
    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
    CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
    CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
    CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
    CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8
} CUmemPool_attribute;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

typedef unsigned int cuuint32_t;

/* cuMemHostAlloc flags */
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04
/* cuMemAllocManaged flags */
#define CU_MEM_ATTACH_GLOBAL 0x1
#define CU_MEM_ATTACH_HOST 0x2

/* ---- runtime API (cuda_runtime_api.h, driver_types.h) ---- */

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorCudartUnloading = 4,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorInvalidDevice = 101,
    cudaErrorDeviceUninitialized = 201,
    cudaErrorPeerAccessUnsupported = 217,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorSymbolNotFound = 500,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorNotPermitted = 800,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;

enum cudaDriverEntryPointQueryResult {
    cudaDriverEntryPointSuccess = 0,
    cudaDriverEntryPointSymbolNotFound = 1,
    cudaDriverEntryPointVersionNotSufficent = 2
};

/* cudaGetDriverEntryPoint flags */
#define cudaEnableDefault 0x0
#define cudaEnableLegacyStream 0x1
#define cudaEnablePerThreadDefaultStream 0x2

/* cudaHostAlloc / cudaMallocManaged flags */
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02

struct cudaPitchedPtr {
    void *ptr;
    size_t pitch;
    size_t xsize;
    size_t ysize;
};

struct cudaExtent {
    size_t width;
    size_t height;
    size_t depth;
};

/* ---- what the simulated runtime adds for PyTorch (driver_types.h,
 * vector_types.h): devices, kernels, streams, events, graphs, IPC ---- */

typedef struct CUuuid_st cudaUUID_t;

/* CUDA 13's layout (cudaGetDeviceProperties has no _v2 suffix any more). */
struct cudaDeviceProp {
 char name[256];
 cudaUUID_t uuid;
 char luid[8];
 unsigned int luidDeviceNodeMask;
 size_t totalGlobalMem;
 size_t sharedMemPerBlock;
 int regsPerBlock;
 int warpSize;
 size_t memPitch;
 int maxThreadsPerBlock;
 int maxThreadsDim[3];
 int maxGridSize[3];
 size_t totalConstMem;
 int major;
 int minor;
 size_t textureAlignment;
 size_t texturePitchAlignment;
 int multiProcessorCount;
 int integrated;
 int canMapHostMemory;
 int maxTexture1D;
 int maxTexture1DMipmap;
 int maxTexture2D[2];
 int maxTexture2DMipmap[2];
 int maxTexture2DLinear[3];
 int maxTexture2DGather[2];
 int maxTexture3D[3];
 int maxTexture3DAlt[3];
 int maxTextureCubemap;
 int maxTexture1DLayered[2];
 int maxTexture2DLayered[3];
 int maxTextureCubemapLayered[2];
 int maxSurface1D;
 int maxSurface2D[2];
 int maxSurface3D[3];
 int maxSurface1DLayered[2];
 int maxSurface2DLayered[3];
 int maxSurfaceCubemap;
 int maxSurfaceCubemapLayered[2];
 size_t surfaceAlignment;
 int concurrentKernels;
 int ECCEnabled;
 int pciBusID;
 int pciDeviceID;
 int pciDomainID;
 int tccDriver;
 int asyncEngineCount;
 int unifiedAddressing;
 int memoryBusWidth;
 int l2CacheSize;
 int persistingL2CacheMaxSize;
 int maxThreadsPerMultiProcessor;
 int streamPrioritiesSupported;
 int globalL1CacheSupported;
 int localL1CacheSupported;
 size_t sharedMemPerMultiprocessor;
 int regsPerMultiprocessor;
 int managedMemory;
 int isMultiGpuBoard;
 int multiGpuBoardGroupID;
 int hostNativeAtomicSupported;
 int pageableMemoryAccess;
 int concurrentManagedAccess;
 int computePreemptionSupported;
 int canUseHostPointerForRegisteredMem;
 int cooperativeLaunch;
 size_t sharedMemPerBlockOptin;
 int pageableMemoryAccessUsesHostPageTables;
 int directManagedMemAccessFromHost;
 int maxBlocksPerMultiProcessor;
 int accessPolicyMaxWindowSize;
 size_t reservedSharedMemPerBlock;
 int hostRegisterSupported;
 int sparseCudaArraySupported;
 int hostRegisterReadOnlySupported;
 int timelineSemaphoreInteropSupported;
 int memoryPoolsSupported;
 int gpuDirectRDMASupported;
 unsigned int gpuDirectRDMAFlushWritesOptions;
 int gpuDirectRDMAWritesOrdering;
 unsigned int memoryPoolSupportedHandleTypes;
 int deferredMappingCudaArraySupported;
 int ipcEventSupported;
 int clusterLaunch;
 int unifiedFunctionPointers;
 int deviceNumaConfig;
 int deviceNumaId;
 int mpsEnabled;
 int hostNumaId;
 unsigned int gpuPciDeviceID;
 unsigned int gpuPciSubsystemID;
 int hostNumaMultinodeIpcSupported;
 int reserved[56];
};

struct cudaFuncAttributes {
    size_t sharedSizeBytes;
    size_t constSizeBytes;
    size_t localSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int ptxVersion;
    int binaryVersion;
    int cacheModeCA;
    int maxDynamicSharedSizeBytes;
    int preferredShmemCarveout;
    int clusterDimMustBeSet;
    int requiredClusterWidth;
    int requiredClusterHeight;
    int requiredClusterDepth;
    int clusterSchedulingPolicyPreference;
    int nonPortableClusterSizeAllowed;
    int reserved[16];
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8
};

/* The runtime's device attributes have the driver's numbers. */
enum cudaDeviceAttr {
    cudaDevAttrComputeCapabilityMajor = 75
};

enum cudaMemPoolAttr {
    cudaMemPoolAttrReleaseThreshold = 0x4,
    cudaMemPoolAttrReservedMemCurrent = 0x5,
    cudaMemPoolAttrUsedMemHigh = 0x8
};

enum cudaMemLocationType {
    cudaMemLocationTypeDevice = 1
};

enum cudaMemAccessFlags {
    cudaMemAccessFlagsProtReadWrite = 3
};

struct cudaMemLocation {
    enum cudaMemLocationType type;
    int id;
};

struct cudaMemAccessDesc {
    struct cudaMemLocation location;
    enum cudaMemAccessFlags flags;
};

enum cudaGraphMemAttributeType {
    cudaGraphMemAttrUsedMemHigh = 0x1,
    cudaGraphMemAttrReservedMemHigh = 0x3
};

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2
};

struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
    long reserved[8];
};

enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1
};

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeRelaxed = 2
};

/* Only passed through pointers here: their members are never read. */
enum cudaJitOption {
    cudaJitMaxRegisters = 0
};
enum cudaLibraryOption {
    cudaLibraryHostUniversalFunctionAndDataTable = 0
};

typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUuserObject_st *cudaUserObject_t;
typedef struct CUlib_st *cudaLibrary_t;
typedef struct CUkern_st *cudaKernel_t;
typedef unsigned long long cudaGraphConditionalHandle;
typedef void (*cudaHostFn_t)(void *userData);
typedef void (*cudaStreamCallback_t)(cudaStream_t stream, cudaError_t status, void *userData);

typedef struct cudaGraphEdgeData_st {
    unsigned char from_port;
    unsigned char to_port;
    unsigned char type;
    unsigned char reserved[5];
} cudaGraphEdgeData;

struct cudaGraphNodeParams; /* a large union: only passed through */
struct cudaLaunchAttribute_st; /* holds a union: only passed through */

typedef struct cudaIpcEventHandle_st {
    char reserved[64];
} cudaIpcEventHandle_t;

typedef struct cudaIpcMemHandle_st {
    char reserved[64];
} cudaIpcMemHandle_t;

struct dim3 {
    unsigned int x;
    unsigned int y;
    unsigned int z;
};
typedef struct dim3 dim3;

typedef struct cudaLaunchConfig_st {
    dim3 gridDim;
    dim3 blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    struct cudaLaunchAttribute_st *attrs;
    unsigned int numAttrs;
} cudaLaunchConfig_t;

#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02

#endif /* CUMEMTRACE_CUDA_TYPES_H */
