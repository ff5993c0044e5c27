/* driver_impl.h - internals shared by the files of the simulated
 * libcuda.so.1: driver.c (contexts, the entry and exit of every call),
 * driver_device.c, driver_memory.c, driver_pool.c, driver_vmm.c,
 * driver_shared.c and driver_procaddress.c - one driver split by concern,
 * one unit for tests/e2e/test_link_cycles.py.  Private to them
 * (driver_vaspace.c, the address space below them, has a header of its own).
 *
 * Every exported function begins with DRIVER_ENTER (configuration, call
 * counting, SIMCUDA_FAIL) and ends with driver_leave (SIMCUDA_LOG).  All
 * state - `driver`, and driver_vmm.c's tables beside it - is guarded by
 * driver.lock, except the current context, which is per thread, and the call
 * counters, which are atomic.  Nothing here is exported: only the cu* entry
 * points are.
 */
#ifndef CUMEMTRACE_SIM_DRIVER_IMPL_H
#define CUMEMTRACE_SIM_DRIVER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <uthash.h>

#include "cuda_api.h"
#include "driver_vaspace.h"
#include "sim_common.h"

#pragma GCC visibility push(hidden)

/* Fake device addresses: device d's linear memory starts at
 * SIM_DEV_BASE + d * SIM_DEV_STRIDE, its VMM reservations SIM_VMM_OFFSET
 * above that.  Far from where Linux maps host memory, so a device pointer
 * never equals a host one.  Nothing ever dereferences them. */
#define SIM_DEV_BASE SIM_DEVICE_WINDOW_BASE
#define SIM_DEV_STRIDE UINT64_C(0x10000000000)  /* 1 TiB per device */
#define SIM_VMM_OFFSET UINT64_C(0x8000000000)   /* 512 GiB */
#define SIM_MAX_CAPACITY SIM_VMM_OFFSET          /* linear memory must fit below the VMM window */
/* Paged linear allocations (>= SIM_LARGE_MIN) get addresses from
 * [SIM_PAGED_OFFSET, SIM_VMM_OFFSET) above the device's base, their physical
 * pages wherever they are free, as a GPU's MMU maps them; smaller ones and
 * SIMCUDA_CONTIGUOUS=1 keep an address that is their physical offset, below
 * it.  A device larger than SIM_PAGED_OFFSET is placed contiguously. */
#define SIM_PAGED_OFFSET UINT64_C(0x4000000000)  /* 256 GiB */
/* 32-bit addresses for the pre-3.2 entry points (cuMemAlloc, cuMemAllocPitch),
 * whose CUdeviceptr_v1 is an unsigned int; shared by all devices. */
#define SIM_V1_BASE SIM_V1_WINDOW_BASE
#define SIM_V1_END SIM_V1_WINDOW_END
#define SIM_MAX_DEVICES 16 /* SIM_DEVICE_WINDOW_END in sim_common.h assumes 16 */
#define SIM_DRIVER_VERSION 13000

/* X(symbol, allocates, base, version, ptsz): every function libcuda.so.1
 * exports.  `allocates` decides what an injected fault returns:
 * CUDA_ERROR_OUT_OF_MEMORY or CUDA_ERROR_UNKNOWN.  The rest is what
 * cuGetProcAddress answers with it (driver_procaddress.c): the name callers
 * ask for, the first CUDA version that binds that name to this symbol, and
 * whether it is the per-thread-default-stream (_ptsz) variant. */
#define DRIVER_SYMBOLS(X)                                                                         \
    X(cuInit, 0, cuInit, 2000, 0)                                                                 \
    X(cuDriverGetVersion, 0, cuDriverGetVersion, 2020, 0)                                         \
    X(cuGetProcAddress, 0, cuGetProcAddress, 11030, 0)                                            \
    X(cuGetProcAddress_v2, 0, cuGetProcAddress, 12000, 0)                                         \
    X(cuGetErrorString, 0, cuGetErrorString, 6000, 0)                                             \
    X(cuGetErrorName, 0, cuGetErrorName, 6000, 0)                                                 \
    X(cuDeviceGet, 0, cuDeviceGet, 2000, 0)                                                       \
    X(cuDeviceGetCount, 0, cuDeviceGetCount, 2000, 0)                                             \
    X(cuDeviceGetName, 0, cuDeviceGetName, 2000, 0)                                               \
    X(cuDeviceTotalMem, 0, cuDeviceTotalMem, 2000, 0)                                             \
    X(cuDeviceTotalMem_v2, 0, cuDeviceTotalMem, 3020, 0)                                          \
    X(cuDeviceGetAttribute, 0, cuDeviceGetAttribute, 2000, 0)                                     \
    X(cuDevicePrimaryCtxRetain, 0, cuDevicePrimaryCtxRetain, 7000, 0)                             \
    X(cuDevicePrimaryCtxRelease, 0, cuDevicePrimaryCtxRelease, 7000, 0)                           \
    X(cuDevicePrimaryCtxRelease_v2, 0, cuDevicePrimaryCtxRelease, 11000, 0)                       \
    X(cuDevicePrimaryCtxReset, 0, cuDevicePrimaryCtxReset, 7000, 0)                               \
    X(cuDevicePrimaryCtxReset_v2, 0, cuDevicePrimaryCtxReset, 11000, 0)                           \
    X(cuDevicePrimaryCtxGetState, 0, cuDevicePrimaryCtxGetState, 7000, 0)                         \
    X(cuDevicePrimaryCtxSetFlags, 0, cuDevicePrimaryCtxSetFlags, 7000, 0)                         \
    X(cuDevicePrimaryCtxSetFlags_v2, 0, cuDevicePrimaryCtxSetFlags, 11000, 0)                     \
    X(cuCtxCreate_v2, 0, cuCtxCreate, 3020, 0)                                                    \
    X(cuCtxCreate_v3, 0, cuCtxCreate, 11040, 0)                                                   \
    X(cuCtxCreate_v4, 0, cuCtxCreate, 12050, 0)                                                   \
    X(cuCtxDestroy_v2, 0, cuCtxDestroy, 4000, 0)                                                  \
    X(cuCtxGetCurrent, 0, cuCtxGetCurrent, 4000, 0)                                               \
    X(cuCtxSetCurrent, 0, cuCtxSetCurrent, 4000, 0)                                               \
    X(cuCtxGetDevice, 0, cuCtxGetDevice, 2000, 0)                                                 \
    X(cuCtxGetDevice_v2, 0, cuCtxGetDevice, 13000, 0)                                             \
    X(cuCtxSynchronize, 0, cuCtxSynchronize, 2000, 0)                                             \
    X(cuCtxSynchronize_v2, 0, cuCtxSynchronize, 13000, 0)                                         \
    X(cuMemGetInfo, 0, cuMemGetInfo, 2000, 0)                                                     \
    X(cuMemGetInfo_v2, 0, cuMemGetInfo, 3020, 0)                                                  \
    X(cuMemAlloc, 1, cuMemAlloc, 2000, 0)                                                         \
    X(cuMemAlloc_v2, 1, cuMemAlloc, 3020, 0)                                                      \
    X(cuMemAllocPitch, 1, cuMemAllocPitch, 2000, 0)                                               \
    X(cuMemAllocPitch_v2, 1, cuMemAllocPitch, 3020, 0)                                            \
    X(cuMemFree, 0, cuMemFree, 2000, 0)                                                           \
    X(cuMemFree_v2, 0, cuMemFree, 3020, 0)                                                        \
    X(cuMemAllocManaged, 1, cuMemAllocManaged, 6000, 0)                                           \
    X(cuMemAllocHost, 1, cuMemAllocHost, 2000, 0)                                                 \
    X(cuMemAllocHost_v2, 1, cuMemAllocHost, 3020, 0)                                              \
    X(cuMemHostAlloc, 1, cuMemHostAlloc, 2020, 0)                                                 \
    X(cuMemFreeHost, 0, cuMemFreeHost, 2000, 0)                                                   \
    X(cuMemAllocAsync, 1, cuMemAllocAsync, 11020, 0)                                              \
    X(cuMemAllocAsync_ptsz, 1, cuMemAllocAsync, 11020, 1)                                         \
    X(cuMemFreeAsync, 0, cuMemFreeAsync, 11020, 0)                                                \
    X(cuMemFreeAsync_ptsz, 0, cuMemFreeAsync, 11020, 1)                                           \
    X(cuMemAllocFromPoolAsync, 1, cuMemAllocFromPoolAsync, 11020, 0)                              \
    X(cuMemAllocFromPoolAsync_ptsz, 1, cuMemAllocFromPoolAsync, 11020, 1)                         \
    X(cuMemPoolCreate, 1, cuMemPoolCreate, 11020, 0)                                              \
    X(cuMemPoolDestroy, 0, cuMemPoolDestroy, 11020, 0)                                            \
    X(cuMemPoolTrimTo, 0, cuMemPoolTrimTo, 11020, 0)                                              \
    X(cuDeviceGetDefaultMemPool, 0, cuDeviceGetDefaultMemPool, 11020, 0)                          \
    X(cuMemAddressReserve, 1, cuMemAddressReserve, 10020, 0)                                      \
    X(cuMemAddressFree, 0, cuMemAddressFree, 10020, 0)                                            \
    X(cuMemCreate, 1, cuMemCreate, 10020, 0)                                                      \
    X(cuMemRelease, 0, cuMemRelease, 10020, 0)                                                    \
    X(cuMemMap, 0, cuMemMap, 10020, 0)                                                            \
    X(cuMemUnmap, 0, cuMemUnmap, 10020, 0)                                                        \
    X(cuMemSetAccess, 0, cuMemSetAccess, 10020, 0)                                                \
    X(cuMemGetAllocationGranularity, 0, cuMemGetAllocationGranularity, 10020, 0)                  \
    X(cuMemRetainAllocationHandle, 0, cuMemRetainAllocationHandle, 11000, 0)                      \
    X(cuMemPoolGetAttribute, 0, cuMemPoolGetAttribute, 11020, 0)                                  \
    X(cuMemPoolSetAttribute, 0, cuMemPoolSetAttribute, 11020, 0)                                  \
    X(cuMemGetAllocationPropertiesFromHandle, 0, cuMemGetAllocationPropertiesFromHandle, 10020, 0)\
    X(cuMemExportToShareableHandle, 0, cuMemExportToShareableHandle, 10020, 0)                    \
    X(cuMemImportFromShareableHandle, 0, cuMemImportFromShareableHandle, 10020, 0)                \
    /* The v1 ABIs of the _v2 symbols below are not simulated: their _v2                          \
     * answers from the first version that has the name (same signatures). */                     \
    X(cuDeviceGetUuid_v2, 0, cuDeviceGetUuid, 9020, 0)                                            \
    X(cuCtxPushCurrent_v2, 0, cuCtxPushCurrent, 4000, 0)                                          \
    X(cuCtxPopCurrent_v2, 0, cuCtxPopCurrent, 4000, 0)                                            \
    X(cuStreamWriteValue32_v2, 0, cuStreamWriteValue32, 8000, 0)                                  \
    X(cuMemGetAddressRange_v2, 0, cuMemGetAddressRange, 3020, 0)                                  \
    X(cuMemsetD32Async, 0, cuMemsetD32Async, 3020, 0)

#define DRIVER_SYM_ENUM(s, ...) SYM_##s,
enum driver_sym { DRIVER_SYMBOLS(DRIVER_SYM_ENUM) DRIVER_NSYMS };
#undef DRIVER_SYM_ENUM

/* A context: a device's primary context, or one made by cuCtxCreate.  A
 * created context is never freed, only marked destroyed (refs 0), so a
 * thread it is still current to gets CUDA_ERROR_INVALID_CONTEXT, not a
 * dangling pointer. */
struct CUctx_st {
    int device;
    int refs;           /* primary: cuDevicePrimaryCtxRetain count; created:
                           1 until cuCtxDestroy; 0 = inactive or destroyed */
    unsigned int flags; /* cuDevicePrimaryCtxSetFlags, cuCtxCreate's flags */
    int created;        /* made by cuCtxCreate */
    struct CUctx_st *next; /* every created context (driver.created) */
};

/* A stream-ordered memory pool. */
struct CUmemPoolHandle_st {
    int device;
    int is_default;      /* the device's default pool: cannot be destroyed */
    int destroyed;       /* destroyed with allocations live: freed with the last one */
    uint64_t live;       /* allocations not yet freed */
    uint64_t live_bytes; /* their requested sizes, checked against max_size */
    uint64_t max_size;   /* CUmemPoolProps.maxSize; 0 = no limit */
    uint64_t reserved;   /* device bytes the pool holds: live and cached blocks */
    uint64_t reserved_high, used_high; /* since creation or the last reset */
    uint64_t release_threshold;        /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    int reuse[3];        /* the three REUSE_* attributes: stored, not acted on */
    struct sim_alloc *cached;          /* freed blocks kept for reuse (uthash-free list) */
    struct CUmemPoolHandle_st *next; /* every pool, to validate handles */
};

struct sim_device {
    uint64_t capacity;         /* bytes: cuDeviceTotalMem, cuMemGetInfo's total */
    uint64_t reserved;         /* SIMCUDA_RESERVED bytes */
    int reserved_charged;      /* taken when the device is first used (driver_charge_reserved) */
    struct driver_vaspace_pages pages;
    struct driver_vaspace_range vmm; /* this device's cuMemAddressReserve window */
    struct driver_vaspace_range linear; /* addresses of paged linear allocations */
    int paged;                 /* large linear allocations take scattered pages */
    struct CUctx_st ctx;
    struct CUmemPoolHandle_st *default_pool;
};

enum sim_alloc_kind {
    AK_LINEAR,    /* cuMemAlloc_v2, cuMemAllocPitch_v2 */
    AK_LINEAR_V1, /* cuMemAlloc, cuMemAllocPitch: 32-bit address in the v1 window */
    AK_MANAGED,   /* cuMemAllocManaged: real host memory, device pages charged */
    AK_ASYNC,     /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    AK_HOST       /* cuMemAllocHost, cuMemHostAlloc: real host memory */
};

/* One live allocation, keyed by the pointer the caller got. */
struct sim_alloc {
    uint64_t addr;
    uint64_t size;                     /* bytes asked for (pitch * height for pitched) */
    enum sim_alloc_kind kind;
    int device;                        /* the device of the context it was made in */
    struct CUctx_st *ctx;              /* that context (freed with it, but for AK_ASYNC) */
    struct driver_vaspace_block block; /* device pages held (VB_NONE for AK_HOST) */
    size_t map_len;                    /* AK_MANAGED, AK_HOST: length of the mmap */
    struct CUmemPoolHandle_st *pool;   /* AK_ASYNC */
    uint64_t footprint;                /* AK_ASYNC: device bytes its block holds */
    struct sim_alloc *next_cached;     /* AK_ASYNC: in pool->cached once freed */
    int paged;                         /* addr from the device's linear window */
    UT_hash_handle hh;
};

/* What the device says it is (SIMCUDA_NAME, SIMCUDA_CC, SIMCUDA_SMS; the
 * --gpu presets of scripts/simgpu set them): libraries choose by these -
 * PyTorch its cuBLAS workspace size and SDPA backend by compute capability. */
struct sim_identity {
    char name[96];      /* cuDeviceGetName */
    int cc_major, cc_minor;
    int sms;            /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
};

struct driver_state {
    pthread_mutex_t lock;
    struct sim_identity id;            /* every device's, read once */
    atomic_int initialized;            /* cuInit succeeded */
    int ndevices;                      /* SIMCUDA_DEVICES */
    int log;                           /* SIMCUDA_LOG */
    uint64_t wait_bytes;               /* SIMCUDA_WAIT_BYTES (0: off) */
    struct sim_fault_set faults;       /* SIMCUDA_FAIL */
    struct sim_device dev[SIM_MAX_DEVICES];
    struct sim_alloc *allocs;          /* uthash: every live allocation but VMM */
    struct driver_vaspace_range v1;    /* addresses for AK_LINEAR_V1 */
    struct CUmemPoolHandle_st *pools;  /* every pool not yet freed */
    struct CUctx_st *created;          /* every context cuCtxCreate made */
};

extern struct driver_state driver;

/* Counts a call of `s` and applies SIMCUDA_FAIL: CUDA_SUCCESS, or the
 * result the call must return without doing anything. */
CUresult driver_enter(enum driver_sym s);

/* Logs the call under SIMCUDA_LOG ("simcuda: <sym><details> = <result>")
 * and returns r. */
CUresult driver_leave(enum driver_sym s, CUresult r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define DRIVER_ENTER(s)                                                 \
    do {                                                                \
        CUresult fault_ = driver_enter(SYM_##s);                        \
        if (fault_ != CUDA_SUCCESS)                                     \
            return driver_leave(SYM_##s, fault_, " (SIMCUDA_FAIL)");    \
    } while (0)

/* An entry point whose whole work is the one expression `call`: entered, then
 * logged with the format and arguments that follow, which may read its
 * result as r. */
#define DRIVER_CALL(s, params, call, ...)                               \
    CUresult s params                                                   \
    {                                                                   \
        DRIVER_ENTER(s);                                                \
        CUresult r = call;                                              \
        return driver_leave(SYM_##s, r, __VA_ARGS__);                   \
    }

/* CUDA_ERROR_NOT_INITIALIZED before a successful cuInit, else CUDA_SUCCESS. */
CUresult driver_ready(void);
/* driver_ready's answer, else CUDA_ERROR_INVALID_VALUE when bad_args. */
CUresult driver_ready_args(int bad_args);

/* With driver.lock held: the device of the calling thread's current
 * context in *dev, or CUDA_ERROR_NOT_INITIALIZED / CUDA_ERROR_INVALID_CONTEXT
 * (no current context, or one released to zero). */
CUresult driver_current_device(int *dev);
/* The calling thread's current context (NULL when none). */
struct CUctx_st *driver_current_context(void);

/* With driver.lock held: takes SIMCUDA_RESERVED on dev if not yet taken.
 * Called wherever a context on dev starts to exist or memory is first
 * placed on it (a primary context, cuCtxCreate, any allocation, cuMemCreate),
 * so the reserve is charged before the first byte whatever the first call. */
void driver_charge_reserved(int dev);

/* Whether dev is an ordinal of a simulated device. */
int driver_valid_device(int dev);

/* CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_DEVICE when dev is not an
 * ordinal of a simulated device, or CUDA_SUCCESS. */
CUresult driver_check_device(CUdevice dev);
/* driver_check_device's answer, else CUDA_ERROR_INVALID_VALUE when bad_args. */
CUresult driver_check_device_args(CUdevice dev, int bad_args);

void driver_lock(void);
void driver_unlock(void);

/* SIMCUDA_SHARED (driver_shared.c): configure reads the variable once;
 * enter (after the driver lock is taken) locks the shared file and reserves
 * what the other processes hold; leave (before the lock is let go) writes
 * this process's usage and unlocks.  No-ops when sharing is off. */
void driver_shared_configure(void);
void driver_shared_enter(void);
void driver_shared_leave(void);
uint64_t driver_shared_others_pages(int device);

/* driver_memory.c, with driver.lock held: frees what context c owns -
 * linear, managed and pinned host memory made in it, not pool allocations
 * (cuDevicePrimaryCtxReset, the last release, cuCtxDestroy). */
void driver_memory_free_context(struct CUctx_st *c);

/* driver_memory.c, with driver.lock held: the live allocation whose pointer
 * is addr, NULL when none. */
struct sim_alloc *driver_memory_find(uint64_t addr);

/* driver_memory.c, with driver.lock held: puts a, its addr set and not in
 * the table, back in the table (a pool block reused). */
void driver_memory_add(struct sim_alloc *a);

/* driver_memory.c, with driver.lock held: places `size` bytes of `kind`
 * device memory on dev, made in the current context, records it and stores
 * it in *out.  CUDA_ERROR_OUT_OF_MEMORY when no placement fits (or the host
 * is out of memory); *out is then untouched. */
CUresult driver_memory_place(int dev, uint64_t size, enum sim_alloc_kind kind,
                             struct sim_alloc **out);

/* driver_memory.c, with driver.lock held: gives back a's device pages, and
 * its address when it was paged; a itself stays the caller's. */
void driver_memory_release_block(struct sim_alloc *a);

/* driver_pool.c, with driver.lock held: creates the default pool of d;
 * CUDA_ERROR_OUT_OF_MEMORY when the host is out of memory. */
CUresult driver_pool_init_device(int d);

/* driver_pool.c, with driver.lock held: a, a live allocation of a pool,
 * is being freed for good (cuMemFree): the pool stops counting it, and a
 * destroyed pool goes with its last allocation.  The caller frees a. */
void driver_pool_drop(struct sim_alloc *a);

/* driver_vmm.c, with driver.lock held: the mapping holding addr, as
 * cuMemGetAddressRange reports it; 0 when addr is not mapped. */
int driver_vmm_range(uint64_t addr, uint64_t *base, uint64_t *size);

/* driver_procaddress.c: the cuGetProcAddress look-up.  Stores the function
 * in *pfn (NULL when none) and the outcome in *status. */
CUresult driver_procaddress_lookup(const char *symbol, void **pfn, int cudaVersion,
                                   cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status);

#pragma GCC visibility pop

#endif
