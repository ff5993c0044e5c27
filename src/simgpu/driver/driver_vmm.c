/* driver_vmm.c - virtual memory management: cuMemCreate / cuMemAddressReserve
 * / cuMemMap and friends, as PyTorch's expandable segments use them.
 *
 * Physical memory (a handle) and addresses (a reservation) are separate:
 *  - cuMemCreate on a device takes size / 2 MiB of its pages at once, with
 *    no contiguity (the GPU's MMU makes any pages look contiguous); host
 *    locations are charged to no device.
 *  - cuMemAddressReserve takes addresses from the VMM window of a device
 *    (the hint's, else the current context's, else device 0's) and no memory.
 *  - cuMemMap puts part of a handle into a reservation.
 * A handle has two counts: user_refs (cuMemCreate and each
 * cuMemRetainAllocationHandle, minus each cuMemRelease) and maps (live
 * mappings).  Its pages go back when both are 0: create -> map -> release
 * -> unmap returns the memory only at the unmap, as NVIDIA documents.
 *
 * Choices where NVIDIA's documentation lists only CUDA_ERROR_INVALID_VALUE:
 * mapping over a mapped range, unmapping anything but whole adjacent
 * mappings, freeing a reservation that still has mappings, or releasing a
 * handle more often than it was created and retained.  The documentation
 * says a mapping offset "currently must be zero"; the sim accepts any
 * granularity-aligned offset with offset + size <= the handle's size.
 * Handle types: POSIX_FD (or none) is accepted; FABRIC is refused with
 * CUDA_ERROR_NOT_SUPPORTED, as on a machine without IMEX
 * (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED is 0) - PyTorch asks for
 * FABRIC first and falls back to POSIX_FD on any error but OOM.  Exporting
 * and importing shareable handles is not simulated (CUDA_ERROR_NOT_SUPPORTED:
 * the memory cannot be shared with another process).
 * All state is guarded by driver.lock.
 */
#include "driver_impl.h"

#include <stdlib.h>
#include <string.h>

struct vmm_handle {
    uint64_t id;                       /* the CUmemGenericAllocationHandle value */
    uint64_t size;
    int device;                        /* -1: host memory */
    unsigned long user_refs;
    unsigned long maps;
    struct driver_vaspace_block block; /* device pages held */
    CUmemAllocationProp prop;          /* as cuMemCreate got it */
    UT_hash_handle hh;
};

struct vmm_mapping {
    uint64_t start, size;
    uint64_t offset; /* into the handle */
    struct vmm_handle *h;
};

struct vmm_reservation {
    uint64_t start, size;
    int window;                 /* the device whose VMM window it is in */
    struct vmm_mapping *map;    /* sorted by start, never overlapping */
    size_t nmap, cap;
    struct vmm_reservation *next;
};

static struct vmm_handle *handles;          /* uthash by id */
static struct vmm_reservation *reservations;
static uint64_t next_id = 1;                /* handles are never reused */

static int aligned(uint64_t v)
{
    return v % SIM_PAGE == 0;
}

static struct vmm_handle *find_handle(uint64_t id)
{
    struct vmm_handle *h = NULL;
    HASH_FIND(hh, handles, &id, sizeof id, h);
    return h;
}

static void maybe_free_handle(struct vmm_handle *h)
{
    if (h->user_refs != 0 || h->maps != 0)
        return;
    if (h->device >= 0)
        driver_vaspace_release(&driver.dev[h->device].pages, &h->block);
    HASH_DEL(handles, h);
    free(h);
}

/* The reservation holding all of [ptr, ptr+size), or NULL. */
static struct vmm_reservation *find_reservation(uint64_t ptr, uint64_t size)
{
    for (struct vmm_reservation *v = reservations; v != NULL; v = v->next)
        if (ptr >= v->start && ptr - v->start < v->size && size <= v->size - (ptr - v->start))
            return v;
    return NULL;
}

/* Index of the first mapping of v that ends after ptr. */
static size_t first_mapping_after(const struct vmm_reservation *v, uint64_t ptr)
{
    size_t i = 0;
    while (i < v->nmap && v->map[i].start + v->map[i].size <= ptr)
        i++;
    return i;
}

/* Whether [ptr, ptr+size) is covered by adjacent mappings of v; *first and
 * *last (exclusive) say which. */
static int fully_mapped(const struct vmm_reservation *v, uint64_t ptr, uint64_t size,
                        size_t *first, size_t *last)
{
    size_t i = first_mapping_after(v, ptr);
    uint64_t cur = ptr, end = ptr + size;
    *first = i;
    while (cur < end) {
        if (i == v->nmap || v->map[i].start > cur)
            return 0;
        cur = v->map[i].start + v->map[i].size;
        i++;
    }
    *last = i;
    return 1;
}

/* ---- granularity and physical memory ---- */

/* CUDA_SUCCESS when loc is a location the sim can place memory at. */
static CUresult check_location(const CUmemLocation *loc, int allow_numa_current)
{
    switch (loc->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return driver_valid_device(loc->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: /* one NUMA node: id 0 */
        return loc->id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return allow_numa_current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    DRIVER_ENTER(cuMemGetAllocationGranularity);
    CUresult r = driver_ready_args(
        granularity == NULL || prop == NULL || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) ||
        check_location(&prop->location, 1) != CUDA_SUCCESS);
    if (r == CUDA_SUCCESS)
        *granularity = SIM_PAGE; /* minimum and recommended alike */
    return driver_leave(SYM_cuMemGetAllocationGranularity, r, "(%d)", (int)option);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    DRIVER_ENTER(cuMemCreate);
    uint64_t id = 0;
    CUresult r = driver_ready_args(handle == NULL || prop == NULL || size == 0 || !aligned(size) ||
                                   flags != 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED);
    if (r == CUDA_SUCCESS) /* documented: HOST_NUMA_CURRENT is invalid here */
        r = check_location(&prop->location, 0);
    if (r == CUDA_SUCCESS && prop->location.type == CU_MEM_LOCATION_TYPE_HOST &&
        prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
        r = CUDA_ERROR_INVALID_VALUE; /* documented: host allocations are not IPC capable */
    if (r == CUDA_SUCCESS && (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC))
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) {
        struct vmm_handle *h = calloc(1, sizeof *h);
        driver_lock();
        if (h == NULL) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            h->device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id
                                                                           : -1;
            if (h->device >= 0)
                driver_charge_reserved(h->device);
            if (h->device >= 0 && driver_vaspace_scatter(&driver.dev[h->device].pages,
                                                         size / SIM_PAGE, &h->block) != 0) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                free(h);
            }
        }
        if (r == CUDA_SUCCESS) {
            h->id = id = next_id++;
            h->size = size;
            h->prop = *prop;
            h->user_refs = 1;
            HASH_ADD(hh, handles, id, sizeof h->id, h);
            *handle = id;
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemCreate, r, "(%zu, type %d id %d) -> %llu", size,
                        prop ? (int)prop->location.type : -1, prop ? prop->location.id : -1,
                        (unsigned long long)id);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    DRIVER_ENTER(cuMemRelease);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS) {
        driver_lock();
        struct vmm_handle *h = find_handle(handle);
        if (h == NULL || h->user_refs == 0) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            h->user_refs--;
            maybe_free_handle(h);
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemRelease, r, "(%llu)", handle);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    DRIVER_ENTER(cuMemRetainAllocationHandle);
    uint64_t id = 0;
    CUresult r = driver_ready_args(handle == NULL);
    if (r == CUDA_SUCCESS) {
        uint64_t a = (uint64_t)(uintptr_t)addr;
        size_t first, last;
        driver_lock();
        struct vmm_reservation *v = find_reservation(a, 1);
        if (v == NULL || !fully_mapped(v, a, 1, &first, &last)) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            struct vmm_handle *h = v->map[first].h;
            h->user_refs++;
            *handle = id = h->id;
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemRetainAllocationHandle, r, "(%p) -> %llu", addr,
                        (unsigned long long)id);
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    DRIVER_ENTER(cuMemGetAllocationPropertiesFromHandle);
    CUresult r = driver_ready_args(prop == NULL);
    if (r == CUDA_SUCCESS) {
        driver_lock();
        struct vmm_handle *h = find_handle(handle);
        if (h == NULL || h->user_refs == 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            *prop = h->prop;
        driver_unlock();
    }
    return driver_leave(SYM_cuMemGetAllocationPropertiesFromHandle, r, "(%llu)", handle);
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    DRIVER_ENTER(cuMemExportToShareableHandle);
    CUresult r = driver_ready_args(shareableHandle == NULL || flags != 0);
    if (r == CUDA_SUCCESS) {
        driver_lock();
        struct vmm_handle *h = find_handle(handle);
        if (h == NULL || h->user_refs == 0 || !(h->prop.requestedHandleTypes & handleType))
            r = CUDA_ERROR_INVALID_VALUE;
        else
            r = CUDA_ERROR_NOT_SUPPORTED; /* no process can map simulated memory */
        driver_unlock();
    }
    return driver_leave(SYM_cuMemExportToShareableHandle, r, "(%llu, %d)", handle,
                        (int)handleType);
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    DRIVER_ENTER(cuMemImportFromShareableHandle);
    CUresult r = driver_ready_args(handle == NULL || osHandle == NULL);
    if (r == CUDA_SUCCESS)
        r = CUDA_ERROR_NOT_SUPPORTED; /* nothing is ever exported */
    return driver_leave(SYM_cuMemImportFromShareableHandle, r, "(%d)", (int)shHandleType);
}

int driver_vmm_range(uint64_t addr, uint64_t *base, uint64_t *size)
{
    size_t first, last;
    struct vmm_reservation *v = find_reservation(addr, 1);
    if (v == NULL || !fully_mapped(v, addr, 1, &first, &last))
        return 0;
    *base = v->map[first].start;
    *size = v->map[first].size;
    return 1;
}

/* ---- address reservations ---- */

/* The device whose VMM window a reservation goes to. */
static int choose_window(uint64_t hint)
{
    int dev;
    for (int d = 0; d < driver.ndevices; d++)
        if (hint != 0 && driver_vaspace_range_covers(&driver.dev[d].vmm, hint))
            return d;
    return driver_current_device(&dev) == CUDA_SUCCESS ? dev : 0;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                             CUdeviceptr addr, unsigned long long flags)
{
    DRIVER_ENTER(cuMemAddressReserve);
    uint64_t out = 0;
    CUresult r = driver_ready_args(ptr == NULL || size == 0 || !aligned(size) || !aligned(addr) ||
                                   flags != 0 || (alignment & (alignment - 1)) != 0);
    if (r == CUDA_SUCCESS) {
        struct vmm_reservation *v = calloc(1, sizeof *v);
        uint64_t align = alignment > SIM_PAGE ? alignment : SIM_PAGE;
        driver_lock();
        int w = choose_window(addr);
        int rc = v == NULL ? -2 : driver_vaspace_range_alloc(&driver.dev[w].vmm, size, align,
                                                             addr, &out);
        if (rc != 0) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            free(v);
            out = 0;
        } else {
            v->start = out;
            v->size = size;
            v->window = w;
            v->next = reservations;
            reservations = v;
            *ptr = out;
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemAddressReserve, r, "(%zu, %zu, 0x%llx) -> 0x%llx", size,
                        alignment, addr, (unsigned long long)out);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    DRIVER_ENTER(cuMemAddressFree);
    CUresult r = driver_ready();
    if (r == CUDA_SUCCESS) {
        driver_lock();
        struct vmm_reservation **pv = &reservations;
        while (*pv != NULL && (*pv)->start != ptr)
            pv = &(*pv)->next;
        struct vmm_reservation *v = *pv;
        if (v == NULL || v->size != size || v->nmap != 0) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            driver_vaspace_range_free(&driver.dev[v->window].vmm, v->start, v->size);
            *pv = v->next;
            free(v->map);
            free(v);
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemAddressFree, r, "(0x%llx, %zu)", ptr, size);
}

/* ---- mappings ---- */

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                  CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    DRIVER_ENTER(cuMemMap);
    CUresult r = driver_ready_args(size == 0 || !aligned(ptr) || !aligned(size) ||
                                   !aligned(offset) || flags != 0);
    if (r == CUDA_SUCCESS) {
        driver_lock();
        struct vmm_handle *h = find_handle(handle);
        struct vmm_reservation *v = find_reservation(ptr, size);
        size_t at = v ? first_mapping_after(v, ptr) : 0;
        if (h == NULL || h->user_refs == 0 || offset > h->size || size > h->size - offset ||
            v == NULL || (at < v->nmap && v->map[at].start < ptr + size)) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else if (sim_common_grow(&v->map, v->nmap, &v->cap, sizeof *v->map, 8) != 0) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r == CUDA_SUCCESS) {
            memmove(&v->map[at + 1], &v->map[at], (v->nmap - at) * sizeof *v->map);
            v->map[at] = (struct vmm_mapping){ptr, size, offset, h};
            v->nmap++;
            h->maps++;
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemMap, r, "(0x%llx, %zu, %zu, %llu)", ptr, size, offset, handle);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    DRIVER_ENTER(cuMemUnmap);
    CUresult r = driver_ready_args(size == 0 || !aligned(ptr) || !aligned(size));
    if (r == CUDA_SUCCESS) {
        size_t first, last;
        driver_lock();
        struct vmm_reservation *v = find_reservation(ptr, size);
        /* Whole mappings only: the range starts and ends on mapping edges. */
        if (v == NULL || !fully_mapped(v, ptr, size, &first, &last) ||
            v->map[first].start != ptr ||
            v->map[last - 1].start + v->map[last - 1].size != ptr + size) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            for (size_t i = first; i < last; i++) {
                v->map[i].h->maps--;
                maybe_free_handle(v->map[i].h);
            }
            memmove(&v->map[first], &v->map[last], (v->nmap - last) * sizeof *v->map);
            v->nmap -= last - first;
        }
        driver_unlock();
    }
    return driver_leave(SYM_cuMemUnmap, r, "(0x%llx, %zu)", ptr, size);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    DRIVER_ENTER(cuMemSetAccess);
    CUresult r = driver_ready_args(desc == NULL || count == 0 || size == 0 || !aligned(ptr) ||
                                   !aligned(size));
    for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++) {
        CUmemAccess_flags f = desc[i].flags;
        if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            r = check_location(&desc[i].location, 0);
    }
    if (r == CUDA_SUCCESS) {
        size_t first, last;
        driver_lock();
        struct vmm_reservation *v = find_reservation(ptr, size);
        if (v == NULL || !fully_mapped(v, ptr, size, &first, &last))
            r = CUDA_ERROR_INVALID_VALUE;
        driver_unlock(); /* access is not enforced: nothing dereferences device memory */
    }
    return driver_leave(SYM_cuMemSetAccess, r, "(0x%llx, %zu, %zu)", ptr, size, count);
}
