/* drv_workload.c - allocation scenarios through the driver API, linked
 * against libcuda.so.1 (the ordinary LD_PRELOAD interposition path). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "progs.h"

static void *dlsym_default(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}


static void context(int ordinal)
{
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0), CUDA_SUCCESS);
    CHECK(cuDeviceGet(&dev, ordinal), CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

static int kinds(void)
{
    CUdeviceptr d, pitched, managed, as, pooled;
    CUdeviceptr_v1 old;
    size_t pitch;
    void *h, *h2;
    context(0);
    CHECK(cuMemAlloc_v2(&d, 6 * MiB), CUDA_SUCCESS);
    CHECK(cuMemAlloc(&old, 2 * MiB), CUDA_SUCCESS);
    CHECK(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 64, 4), CUDA_SUCCESS);
    CHECK(cuMemAllocManaged(&managed, 4 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK(cuMemAllocHost_v2(&h, 3 * MiB), CUDA_SUCCESS);
    CHECK(cuMemHostAlloc(&h2, 1 * MiB, 0), CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&as, 5 * MiB, NULL), CUDA_SUCCESS);
    CUmemoryPool pool;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CHECK(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    CHECK(cuMemAllocFromPoolAsync_ptsz(&pooled, 7 * MiB, pool, NULL), CUDA_SUCCESS);
    printf("pitch %zu\n", pitch);

    CHECK(cuMemFree_v2(pitched), CUDA_SUCCESS);
    CHECK(cuMemFree(old), CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(as, NULL), CUDA_SUCCESS);
    CHECK(cuMemFreeAsync_ptsz(pooled, NULL), CUDA_SUCCESS);
    CHECK(cuMemFreeHost(h2), CUDA_SUCCESS);
    CHECK(cuMemFreeHost(h), CUDA_SUCCESS);
    CHECK(cuMemFree_v2(managed), CUDA_SUCCESS);
    /* live at exit: d (6 MiB device) */
    (void)d;
    return 0;
}

/* NCCL's pattern: create, map, retain the handle from the address, release
 * twice; physical memory is gone only at the last release. */
static int vmm(void)
{
    context(0);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUdeviceptr va;
    CUmemGenericAllocationHandle h, again, host;
    CHECK(cuMemAddressReserve(&va, 32 * MiB, 0, 0, 0), CUDA_SUCCESS);
    CHECK(cuMemCreate(&h, 8 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK(cuMemMap(va, 8 * MiB, 0, h, 0), CUDA_SUCCESS);
    CHECK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)va), CUDA_SUCCESS);
    if (again != h)
        return fprintf(stderr, "retained handle differs\n"), 1;
    CHECK(cuMemRelease(h), CUDA_SUCCESS);       /* 1st release: still held */
    if (getenv("WORKLOAD_DUMP_MID")) {
        int (*dump)(const char *) = NULL;
        *(void **)&dump = dlsym_default("cumemtrace_dump");
        if (dump)
            dump("mid.json");
    }
    CHECK(cuMemUnmap(va, 8 * MiB), CUDA_SUCCESS);
    CHECK(cuMemRelease(again), CUDA_SUCCESS);   /* last release: freed */
    CHECK(cuMemAddressFree(va, 32 * MiB), CUDA_SUCCESS);

    /* host-located physical memory is host memory, not device memory */
    CUmemAllocationProp hp = prop;
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    hp.location.id = 0;
    CHECK(cuMemCreate(&host, 4 * MiB, &hp, 0), CUDA_SUCCESS);
    /* live at exit: host (4 MiB host) */
    return 0;
}

/* The last cuDevicePrimaryCtxRelease destroys the context with its linear,
 * managed and pinned host memory; pool memory stays (cuCtxDestroy's note).
 * Twice 48 MiB of device memory: under CUMEMTRACE_LIMIT=64MiB the second
 * fits only if the first is seen freed. */
static int release(void)
{
    CUdeviceptr d, m, as;
    void *h;
    context(0);
    CHECK(cuMemAlloc_v2(&d, 48 * MiB), CUDA_SUCCESS);
    CHECK(cuMemAllocManaged(&m, 2 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK(cuMemAllocHost_v2(&h, 4 * MiB), CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&as, 2 * MiB, NULL), CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS); /* to zero */
    context(0);
    CHECK(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);    /* it is gone */
    CHECK(cuMemAlloc_v2(&d, 48 * MiB), CUDA_SUCCESS);
    /* live at exit: the second d (48 MiB device), as (2 MiB async) */
    return 0;
}

/* cuDevicePrimaryCtxReset (what cudaDeviceReset does): the same, with the
 * retain count kept. */
static int reset(void)
{
    CUdeviceptr d;
    void *h;
    context(0);
    CHECK(cuMemAlloc_v2(&d, 48 * MiB), CUDA_SUCCESS);
    CHECK(cuMemHostAlloc(&h, 4 * MiB, 0), CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&d, 48 * MiB), CUDA_SUCCESS);
    return 0;
}

/* cuCtxDestroy of a created context frees its linear and pinned host
 * memory, not the primary context's, not its pool allocation; under
 * CUMEMTRACE_LIMIT=64MiB the last 48 MiB fit only if that is seen. */
static int created(void)
{
    CUdeviceptr prim, d, as;
    CUcontext c;
    void *h;
    context(0);
    CUcontext primary;
    CHECK(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&prim, 8 * MiB), CUDA_SUCCESS);
    CHECK(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&d, 48 * MiB), CUDA_SUCCESS);
    CHECK(cuMemAllocHost_v2(&h, 4 * MiB), CUDA_SUCCESS);
    CHECK(cuMemAllocAsync(&as, 2 * MiB, NULL), CUDA_SUCCESS);
    CHECK(cuCtxDestroy_v2(c), CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&d, 48 * MiB), CUDA_SUCCESS);
    /* live at exit: prim and the second d (56 MiB device), as (2 MiB async) */
    return 0;
}

/* More created contexts alive at once than the tracker numbers (958): 1200
 * contexts with 2 MiB of device memory and 1 MiB pinned in each, all
 * destroyed; then 2400 MiB, which CUMEMTRACE_LIMIT=2500MiB grants only if
 * every destroyed context's memory was seen freed. */
static int many_contexts(void)
{
    enum { N = 1200 };
    static CUcontext c[N];
    CUdeviceptr d;
    void *h;
    CUcontext primary;
    context(0);
    CHECK(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
    for (int i = 0; i < N; i++) {
        CHECK(cuCtxCreate_v2(&c[i], 0, 0), CUDA_SUCCESS);
        CHECK(cuMemAlloc_v2(&d, 2 * MiB), CUDA_SUCCESS);
        CHECK(cuMemAllocHost_v2(&h, MiB), CUDA_SUCCESS);
    }
    for (int i = 0; i < N; i++)
        CHECK(cuCtxDestroy_v2(c[i]), CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(primary), CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&d, 2400 * MiB), CUDA_SUCCESS);
    /* live at exit: d (2400 MiB) */
    return 0;
}

/* NVIDIA's runtime releases its primary contexts from an atexit handler it
 * registers at initialisation: the memory still held then is a leak, and
 * the exit snapshot must show it live, not freed by the teardown. */
static void release_at_exit(void)
{
    CHECK(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
}

static int exit_teardown(void)
{
    CUdeviceptr d;
    context(0);
    atexit(release_at_exit); /* as a runtime does when it initialises */
    CHECK(cuMemAlloc_v2(&d, 8 * MiB), CUDA_SUCCESS);
    return 0;
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "kinds";
    if (strcmp(s, "kinds") == 0)
        return kinds();
    if (strcmp(s, "vmm") == 0)
        return vmm();
    if (strcmp(s, "release") == 0)
        return release();
    if (strcmp(s, "reset") == 0)
        return reset();
    if (strcmp(s, "many_contexts") == 0)
        return many_contexts();
    if (strcmp(s, "created") == 0)
        return created();
    if (strcmp(s, "exit_teardown") == 0)
        return exit_teardown();
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
}
