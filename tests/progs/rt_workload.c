/* rt_workload.c - allocation scenarios through the CUDA runtime, run under
 * LD_PRELOAD by tests/e2e.  Built twice: rt_workload links the shared
 * runtime, static_workload (which #includes this file) the static archive.
 * Usage: rt_workload SCENARIO [ARGS]; exits 0 when every CUDA call returned
 * what the scenario expects, prints the failing call otherwise. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

/* Distinct call sites, so stacks differ (noinline keeps the frames). */
__attribute__((noinline)) void *alloc_weights(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

__attribute__((noinline)) void *alloc_activations(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

/* Every runtime allocation kind, with exact sizes the test checks. */
static int basic(void)
{
    void *w = alloc_weights(64 * MiB);
    void *a = alloc_activations(32 * MiB);
    void *h = NULL, *m = NULL, *pitched = NULL, *as = NULL, *h2 = NULL;
    size_t pitch = 0;
    CHECK(cudaMallocHost(&h, 4 * MiB), cudaSuccess);
    memset(h, 1, 4 * MiB); /* pinned memory is real host memory */
    CHECK(cudaHostAlloc(&h2, 1 * MiB, cudaHostAllocDefault), cudaSuccess);
    CHECK(cudaMallocManaged(&m, 8 * MiB, cudaMemAttachGlobal), cudaSuccess);
    CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 100), cudaSuccess);
    CHECK(cudaMallocAsync(&as, 16 * MiB, NULL), cudaSuccess);
    struct cudaPitchedPtr pp;
    struct cudaExtent ext = {1000, 10, 10};
    CHECK(cudaMalloc3D(&pp, ext), cudaSuccess);
    printf("pitch %zu pitch3d %zu\n", pitch, pp.pitch);

    CHECK(cudaFree(a), cudaSuccess);         /* activations: freed */
    CHECK(cudaFreeAsync(as, NULL), cudaSuccess);
    CHECK(cudaFreeHost(h2), cudaSuccess);
    CHECK(cudaFree(pitched), cudaSuccess);
    CHECK(cudaFree(pp.ptr), cudaSuccess);
    CHECK(cudaFree(NULL), cudaSuccess);
    /* left live at exit (leaks the report must show): w, h, m */
    (void)w;
    (void)m;
    (void)h;
    return 0;
}

/* Errors must reach the application unchanged. */
static int errors(void)
{
    void *p = NULL;
    CHECK(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
    CHECK(cudaMalloc(&p, 2 * MiB), cudaSuccess);
    CHECK(cudaFree(p), cudaSuccess);
    CHECK(cudaFree(p), cudaErrorInvalidValue);     /* double free */
    CHECK(cudaFree((void *)0x1234), cudaErrorInvalidValue); /* foreign */
    CHECK(cudaFreeHost((void *)0x1234), cudaErrorInvalidValue);
    CHECK(cudaMalloc(&p, 1ull << 50), cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError(), cudaErrorMemoryAllocation);
    size_t f = 0, t = 0;
    CHECK(cudaMemGetInfo(&f, &t), cudaSuccess);
    printf("free %zu total %zu\n", f, t);
    return 0;
}

/* N threads each allocate K blocks, all wait, then free: the peak is the
 * sum of everything, exactly, whatever the interleaving. */
#define K 50
static pthread_barrier_t barrier;

static void *thread_main(void *arg)
{
    size_t id = (size_t)arg;
    void *p[K];
    for (int i = 0; i < K; i++)
        CHECK(cudaMalloc(&p[i], (id + 1) * 4096 + (size_t)i * 512), cudaSuccess);
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < K; i++)
        CHECK(cudaFree(p[i]), cudaSuccess);
    pthread_barrier_wait(&barrier);
    /* then churn: alloc/free pairs racing with the other threads */
    for (int i = 0; i < 2000; i++) {
        void *q;
        CHECK(cudaMalloc(&q, 512), cudaSuccess);
        CHECK(cudaFree(q), cudaSuccess);
    }
    return NULL;
}

static int threads(int n)
{
    pthread_t t[64];
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, thread_main, (void *)(size_t)i);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return 0;
}

/* The child starts with empty tables: it reports only its own memory. */
static int do_fork(void)
{
    void *parent = alloc_weights(10 * MiB);
    pid_t pid = fork();
    if (pid == 0) {
        void *c = NULL;
        CHECK(cudaMalloc(&c, 3 * MiB), cudaSuccess);
        _exit(0 * (c != NULL)); /* _exit: the child's exit snapshot is not wanted */
    }
    int st;
    waitpid(pid, &st, 0);
    pid = fork();
    if (pid == 0) {
        void *c = NULL;
        /* The parent's memory is not the child's: an unknown free, first, so
         * that the allocation after it is the child's first (a fork child
         * must start its thread again: init.c, hooks_thread_start) */
        CHECK(cudaFree(parent), cudaSuccess);
        CHECK(cudaMalloc(&c, 5 * MiB), cudaSuccess);
        exit(0); /* this child writes its own snapshot: 5 MiB only */
    }
    waitpid(pid, &st, 0);
    pid = fork();
    if (pid == 0)
        exit(0); /* touched nothing: writes nothing */
    waitpid(pid, &st, 0);
    CHECK(cudaFree(parent), cudaSuccess);
    return 0;
}

/* cudaGetDriverEntryPoint(ByVersion) -> VMM, like PyTorch's expandable
 * segments: reserve 64 MiB, create 2 x 20 MiB... (granularity 2 MiB). */
static int entrypoint(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    void *dummy;
    CHECK(cudaMalloc(&dummy, 512), cudaSuccess); /* initialise the context */
    CHECK(cudaFree(dummy), cudaSuccess);
    PFN(cuMemCreate) create;
    PFN(cuMemMap) map;
    PFN(cuMemUnmap) unmap;
    PFN(cuMemRelease) release;
    PFN(cuMemAddressReserve) reserve;
    PFN(cuMemAddressFree) afree;
    PFN(cuMemSetAccess) access;
    CHECK(cudaGetDriverEntryPoint("cuMemCreate", &fn, cudaEnableDefault, &st), cudaSuccess);
    create = (PFN(cuMemCreate))fn;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemMap", &fn, 12000, cudaEnableDefault, &st), cudaSuccess);
    map = (PFN(cuMemMap))fn;
    CHECK(cudaGetDriverEntryPoint("cuMemUnmap", &fn, cudaEnableDefault, &st), cudaSuccess);
    unmap = (PFN(cuMemUnmap))fn;
    CHECK(cudaGetDriverEntryPoint("cuMemRelease", &fn, cudaEnableDefault, &st), cudaSuccess);
    release = (PFN(cuMemRelease))fn;
    CHECK(cudaGetDriverEntryPoint("cuMemAddressReserve", &fn, cudaEnableDefault, &st), cudaSuccess);
    reserve = (PFN(cuMemAddressReserve))fn;
    CHECK(cudaGetDriverEntryPoint("cuMemAddressFree", &fn, cudaEnableDefault, &st), cudaSuccess);
    afree = (PFN(cuMemAddressFree))fn;
    CHECK(cudaGetDriverEntryPoint("cuMemSetAccess", &fn, cudaEnableDefault, &st), cudaSuccess);
    access = (PFN(cuMemSetAccess))fn;

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUdeviceptr base;
    CHECK(reserve(&base, 64 * MiB, 0, 0, 0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h1, h2;
    CHECK(create(&h1, 20 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK(create(&h2, 20 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK(map(base, 20 * MiB, 0, h1, 0), CUDA_SUCCESS);
    CHECK(map(base + 20 * MiB, 20 * MiB, 0, h2, 0), CUDA_SUCCESS);
    CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(access(base, 40 * MiB, &ad, 1), CUDA_SUCCESS);
    /* expandable segments shrink: unmap and release the second chunk */
    CHECK(unmap(base + 20 * MiB, 20 * MiB), CUDA_SUCCESS);
    CHECK(release(h2), CUDA_SUCCESS);
    if (getenv("WORKLOAD_VMM_CLEANUP")) {
        CHECK(unmap(base, 20 * MiB), CUDA_SUCCESS);
        CHECK(release(h1), CUDA_SUCCESS);
        CHECK(afree(base, 64 * MiB), CUDA_SUCCESS);
    }
    return 0;
}

/* cudaDeviceReset frees the context's device, managed and pinned host
 * memory; the stream-ordered allocation stays (it belongs to a pool). */
static int reset(void)
{
    void *a, *m, *as, *h;
    CHECK(cudaMalloc(&a, 8 * MiB), cudaSuccess);
    CHECK(cudaMallocManaged(&m, 2 * MiB, cudaMemAttachGlobal), cudaSuccess);
    CHECK(cudaMallocAsync(&as, 4 * MiB, NULL), cudaSuccess);
    CHECK(cudaMallocHost(&h, 3 * MiB), cudaSuccess);
    CHECK(cudaDeviceReset(), cudaSuccess);
    CHECK(cudaFreeHost(h), cudaErrorInvalidValue); /* the driver freed it */
    CHECK(cudaMalloc(&a, 1 * MiB), cudaSuccess); /* a new context */
    return 0;
}

/* Allocations 1.2 s and 0.3 s apart: the event times must say so, across
 * the clock's switch from CLOCK_MONOTONIC to the calibrated TSC (clock.c).
 * Each call is bracketed by this program's own CLOCK_MONOTONIC readings
 * (printed as "t<N>=before,after" in ns), so the test compares the event
 * times with what really elapsed, not with what nanosleep was asked for (a
 * loaded machine oversleeps by tens of milliseconds). */
static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int timed(void)
{
    void *p;
    struct timespec gap[2] = {{1, 200000000}, {0, 300000000}};
    for (int i = 0; i < 3; i++) {
        if (i > 0)
            nanosleep(&gap[i - 1], NULL);
        int64_t before = mono_ns();
        CHECK(cudaMalloc(&p, (size_t)(i + 1) * MiB), cudaSuccess);
        int64_t after = mono_ns();
        printf("t%d=%lld,%lld\n", i + 1, (long long)before, (long long)after);
    }
    return 0;
}

/* Allocate until the device is full: a real OOM from the simulated card. */
static int oom(void)
{
    void *p;
    size_t n = 0;
    while (cudaMalloc(&p, 1024 * MiB) == cudaSuccess)
        n++;
    printf("allocated %zu GiB before OOM\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "basic";
    if (strcmp(s, "basic") == 0)
        return basic();
    if (strcmp(s, "errors") == 0)
        return errors();
    if (strcmp(s, "threads") == 0)
        return threads(argc > 2 ? atoi(argv[2]) : 8);
    if (strcmp(s, "fork") == 0)
        return do_fork();
    if (strcmp(s, "entrypoint") == 0)
        return entrypoint();
    if (strcmp(s, "oom") == 0)
        return oom();
    if (strcmp(s, "reset") == 0)
        return reset();
    if (strcmp(s, "timed") == 0)
        return timed();
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
}
