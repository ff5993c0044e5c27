/* nccl_mem.c - the simulated NCCL's memory: ncclMemAlloc/ncclMemFree through
 * the driver, buffer and window registration, and the device-side API it
 * does not simulate.
 *
 * ncclMemAlloc takes memory as NVIDIA's NCCL does with CUDA's virtual memory
 * management: the driver's cuMemCreate, cuMemAddressReserve, cuMemMap and
 * cuMemSetAccess, reached through cudaGetDriverEntryPointByVersion (so a
 * tracer sees what NCCL's own path shows it: physical handles, mapped), the
 * size rounded up to the recommended granularity.  ncclMemFree undoes it.
 *
 * Workload: a few allocations per communicator; a linked list is enough.
 * Threads: one mutex guards the list.
 */
#include "nccl_impl.h"

#include <pthread.h>
#include <stdlib.h>

#include "cuda_api.h"

/* The CUDA version whose driver ABI the entry points are asked at: 12.0,
 * the first with every one of them in its current form. */
#define DRIVER_ABI 12000

/* The driver functions ncclMemAlloc needs, looked up in this order; each
 * named only inside __typeof__, so the library never links to libcuda. */
#define VMM_FUNCTIONS(X)                                                       \
    X(cuMemGetAllocationGranularity) X(cuMemCreate) X(cuMemRelease)            \
    X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap)       \
    X(cuMemSetAccess)
#define VMM_FIELD(fn) __typeof__(fn) *fn;
static struct { VMM_FUNCTIONS(VMM_FIELD) } drv;
#undef VMM_FIELD
static int drv_ok;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

struct block {
    struct block *next;
    CUdeviceptr ptr;
    size_t size;
    CUmemGenericAllocationHandle handle;
};
static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int entry(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult st;
    return cudaGetDriverEntryPointByVersion(name, fn, DRIVER_ABI, cudaEnableDefault, &st) ==
               cudaSuccess &&
           *fn != NULL;
}

#define VMM_ENTRY(fn) && entry(#fn, (void **)&drv.fn)
static void resolve(void)
{
    drv_ok = 1 VMM_FUNCTIONS(VMM_ENTRY); /* stops at the first one missing */
}
#undef VMM_ENTRY

static int cuda_fail(const char *what, CUresult r)
{
    return nccl_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? NCCL_SYSTEM_ERROR : NCCL_UNHANDLED_CUDA_ERROR,
                     "ncclMemAlloc: %s failed: CUDA error %d%s", what, (int)r,
                     r == CUDA_ERROR_OUT_OF_MEMORY ? " (out of memory)" : "");
}

int nccl_mem_alloc(void **ptr, size_t size)
{
    pthread_once(&drv_once, resolve);
    if (!drv_ok)
        return nccl_fail(NCCL_UNHANDLED_CUDA_ERROR,
                         "ncclMemAlloc: the driver offers no virtual memory management");
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return nccl_fail(NCCL_UNHANDLED_CUDA_ERROR, "ncclMemAlloc: cudaGetDevice failed");
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CUresult r =
        drv.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || gran == 0)
        return cuda_fail("cuMemGetAllocationGranularity", r);
    if (size > SIZE_MAX - gran)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclMemAlloc: %zu bytes is too large", size);
    size = (size + gran - 1) / gran * gran;
    struct block *b = malloc(sizeof *b);
    if (b == NULL)
        return nccl_fail(NCCL_SYSTEM_ERROR, "ncclMemAlloc: out of host memory");
    b->size = size;
    if ((r = drv.cuMemCreate(&b->handle, size, &prop, 0)) != CUDA_SUCCESS) {
        free(b);
        return cuda_fail("cuMemCreate", r);
    }
    if ((r = drv.cuMemAddressReserve(&b->ptr, size, gran, 0, 0)) != CUDA_SUCCESS) {
        drv.cuMemRelease(b->handle);
        free(b);
        return cuda_fail("cuMemAddressReserve", r);
    }
    CUmemAccessDesc access = {prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    const char *what = NULL;
    if ((r = drv.cuMemMap(b->ptr, size, 0, b->handle, 0)) != CUDA_SUCCESS) {
        what = "cuMemMap";
    } else if ((r = drv.cuMemSetAccess(b->ptr, size, &access, 1)) != CUDA_SUCCESS) {
        what = "cuMemSetAccess";
        drv.cuMemUnmap(b->ptr, size);
    }
    if (what != NULL) {
        drv.cuMemAddressFree(b->ptr, size);
        drv.cuMemRelease(b->handle);
        free(b);
        return cuda_fail(what, r);
    }
    pthread_mutex_lock(&lock);
    b->next = blocks;
    blocks = b;
    pthread_mutex_unlock(&lock);
    *ptr = (void *)(uintptr_t)b->ptr;
    return NCCL_SUCCESS;
}

int nccl_mem_free(void *ptr)
{
    pthread_mutex_lock(&lock);
    struct block **p = &blocks;
    while (*p != NULL && (*p)->ptr != (CUdeviceptr)(uintptr_t)ptr)
        p = &(*p)->next;
    struct block *b = *p;
    if (b != NULL)
        *p = b->next;
    pthread_mutex_unlock(&lock);
    if (b == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclMemFree: %p did not come from ncclMemAlloc",
                         ptr);
    CUresult r = drv.cuMemUnmap(b->ptr, b->size);
    CUresult r2 = drv.cuMemRelease(b->handle);
    CUresult r3 = drv.cuMemAddressFree(b->ptr, b->size);
    free(b);
    if (r != CUDA_SUCCESS || r2 != CUDA_SUCCESS || r3 != CUDA_SUCCESS)
        return nccl_fail(NCCL_UNHANDLED_CUDA_ERROR,
                         "ncclMemFree: the driver refused to unmap or release %p", ptr);
    return NCCL_SUCCESS;
}

NCCL_API int ncclMemAlloc(void **ptr, size_t size)
{
    if (ptr == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclMemAlloc: ptr is NULL");
    if (size == 0) {
        *ptr = NULL;
        return NCCL_SUCCESS;
    }
    return nccl_mem_alloc(ptr, size);
}

NCCL_API int ncclMemFree(void *ptr)
{
    return ptr == NULL ? NCCL_SUCCESS : nccl_mem_free(ptr);
}

/* A registered buffer or window: what was registered, for its owner. */
struct reg {
    uint32_t magic; /* REG_MAGIC or WIN_MAGIC while registered */
    void *comm;
    void *buff;
    size_t size;
};
#define REG_MAGIC 0x534e5247u /* "SNRG" */
#define WIN_MAGIC 0x534e5749u /* "SNWI" */

static int reg_new(const char *who, uint32_t magic, void *comm, void *buff, size_t size,
                   void **out)
{
    if (nccl_comm_of(comm, who) == NULL)
        return NCCL_INVALID_ARGUMENT;
    if (out == NULL || (buff == NULL && size != 0))
        return nccl_fail(NCCL_INVALID_ARGUMENT, "%s: bad buffer or handle", who);
    struct reg *g = malloc(sizeof *g);
    if (g == NULL)
        return nccl_fail(NCCL_SYSTEM_ERROR, "%s: out of host memory", who);
    *g = (struct reg){magic, comm, buff, size};
    *out = g;
    return NCCL_SUCCESS;
}

static struct reg *reg_of(const char *who, uint32_t magic, void *comm, void *handle)
{
    struct reg *g = handle;
    if (nccl_comm_of(comm, who) == NULL)
        return NULL;
    if (g == NULL || g->magic != magic || g->comm != comm) {
        nccl_fail(NCCL_INVALID_ARGUMENT, "%s: %p is not registered with this communicator", who,
                  handle);
        return NULL;
    }
    return g;
}

/* Registration lets NVIDIA's NCCL skip a copy; here there is none to skip. */
NCCL_API int ncclCommRegister(void *comm, void *buff, size_t size, void **handle)
{
    return reg_new("ncclCommRegister", REG_MAGIC, comm, buff, size, handle);
}

/* Forgets a registration made by reg_new with magic. */
static int reg_free(const char *who, uint32_t magic, void *comm, void *handle)
{
    struct reg *g = reg_of(who, magic, comm, handle);
    if (g == NULL)
        return NCCL_INVALID_ARGUMENT;
    g->magic = 0;
    free(g);
    return NCCL_SUCCESS;
}

NCCL_API int ncclCommDeregister(void *comm, void *handle)
{
    return reg_free("ncclCommDeregister", REG_MAGIC, comm, handle);
}

NCCL_API int ncclCommWindowRegister(void *comm, void *buff, size_t size, void **win, int flags)
{
    (void)flags;
    return reg_new("ncclCommWindowRegister", WIN_MAGIC, comm, buff, size, win);
}

NCCL_API int ncclCommWindowDeregister(void *comm, void *win)
{
    return reg_free("ncclCommWindowDeregister", WIN_MAGIC, comm, win);
}

NCCL_API int ncclWinGetUserPtr(void *comm, void *win, void **out)
{
    struct reg *g = reg_of("ncclWinGetUserPtr", WIN_MAGIC, comm, win);
    if (g == NULL)
        return NCCL_INVALID_ARGUMENT;
    if (out == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclWinGetUserPtr: outUserPtr is NULL");
    *out = g->buff;
    return NCCL_SUCCESS;
}

/* NCCL's device-side API (kernels that reach peers' memory) and one-sided
 * signals need peers' memory mapped into this process: not simulated.  They
 * refuse, so PyTorch reports an NCCL error instead of using garbage. */
static int not_simulated(const char *who)
{
    return nccl_fail(NCCL_INVALID_USAGE,
                     "%s: the simulated NCCL has no device-side API or one-sided "
                     "communication (docs/simgpu.md, fidelity limits)", who);
}

#define NOT_SIMULATED(name) \
    NCCL_API int name(void) { return not_simulated(#name); }

NOT_SIMULATED(ncclDevCommCreate)
NOT_SIMULATED(ncclDevCommDestroy)
NOT_SIMULATED(ncclGetPeerDevicePointer)
NOT_SIMULATED(ncclGetLsaMultimemDevicePointer)
NOT_SIMULATED(ncclPutSignal)
NOT_SIMULATED(ncclSignal)
NOT_SIMULATED(ncclWaitSignal)
