/* rt_oom.c - out-of-memory scenarios for the post-mortem tests, on a small
 * simulated card (the tests set SIMCUDA_MEMORY).  Includes a PyTorch-like
 * caching allocator: 2 MiB segments for requests <= 1 MiB, 20 MiB for
 * 1-10 MiB, exact size above; on a failed cudaMalloc it frees its cached
 * segments and retries, as c10's CUDACachingAllocator does (docs/design.md,
 * "Facts"). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "progs.h"


/* ---- a tiny caching allocator ---- */

struct segment {
    void *ptr;
    size_t size;
    int in_use;
};
static struct segment cache[4096];
static int nseg;

static size_t segment_size(size_t n)
{
    if (n <= 1 * MiB)
        return 2 * MiB;
    if (n <= 10 * MiB)
        return 20 * MiB;
    return n;
}

static size_t release_cached(void)
{
    size_t freed = 0;
    for (int i = 0; i < nseg; i++)
        if (cache[i].ptr && !cache[i].in_use) {
            CHECK(cudaFree(cache[i].ptr), cudaSuccess);
            freed += cache[i].size;
            cache[i].ptr = NULL;
        }
    return freed;
}

__attribute__((noinline)) static void *cached_malloc(size_t n)
{
    size_t size = segment_size(n);
    for (int i = 0; i < nseg; i++)
        if (cache[i].ptr && !cache[i].in_use && cache[i].size == size) {
            cache[i].in_use = 1;
            return cache[i].ptr;
        }
    void *p;
    cudaError_t r = cudaMalloc(&p, size);
    if (r == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        release_cached(); /* free everything cached, then retry once */
        r = cudaMalloc(&p, size);
    }
    if (r != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL; /* torch.OutOfMemoryError */
    }
    cache[nseg].ptr = p;
    cache[nseg].size = size;
    cache[nseg].in_use = 1;
    nseg++;
    return p;
}

static void cached_free(void *p)
{
    for (int i = 0; i < nseg; i++)
        if (cache[i].ptr == p)
            cache[i].in_use = 0;
}

/* ---- scenarios ---- */

/* On a 256 MiB card: twelve 20 MiB segments, six of them returned to the
 * cache, then a 100 MiB tensor.  The first cudaMalloc fails; releasing the
 * cache frees 120 MiB.  If the six were contiguous the retry succeeds
 * ("recover"); if they alternate, no 100 MiB hole exists ("fail"). */
static int caching(int contiguous)
{
    void *held[12];
    void *p;
    for (int i = 0; i < 12; i++)
        if ((held[i] = cached_malloc(5 * MiB)) == NULL)
            return fprintf(stderr, "card too small\n"), 1;
    for (int i = 0; i < 6; i++)
        cached_free(held[contiguous ? i : 2 * i]);
    p = cached_malloc(100 * MiB);
    printf("%s\n", p ? "recovered" : "failed");
    return 0;
}

__attribute__((noinline)) int fragment(void)
{
    /* 2 MiB blocks across the whole card, then free every other one: half
     * the card is free, yet no 4 MiB hole exists. */
    void *p[1024];
    int n = 0;
    while (n < 1024 && cudaMalloc(&p[n], 2 * MiB) == cudaSuccess)
        n++;
    (void)cudaGetLastError();
    for (int i = 0; i < n; i += 2)
        CHECK(cudaFree(p[i]), cudaSuccess);
    void *q;
    CHECK(cudaMalloc(&q, 4 * MiB), cudaErrorMemoryAllocation);
    return 0;
}

__attribute__((noinline)) int exhaust(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 40 * MiB), cudaSuccess);
    CHECK(cudaMalloc(&p, 1024 * MiB), cudaErrorMemoryAllocation);
    return 0;
}

static int limit(void)
{
    void *a, *b;
    size_t f, t;
    CHECK(cudaMalloc(&a, 64 * MiB), cudaSuccess);
    CHECK(cudaMemGetInfo(&f, &t), cudaSuccess);
    printf("limited free %zu total %zu\n", f, t);
    (void)cudaMemGetInfo(NULL, &t); /* must not crash under a limit */
    (void)cudaGetLastError();
    CHECK(cudaMalloc(&b, 64 * MiB), cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError(), cudaSuccess); /* refused before the runtime */
    CHECK(cudaMalloc(&b, 30 * MiB), cudaSuccess);
    return 0;
}

static int vmm(void)
{
    void *fn;
    enum cudaDriverEntryPointQueryResult st;
    void *d;
    CHECK(cudaMalloc(&d, 512), cudaSuccess);
    CHECK(cudaGetDriverEntryPoint("cuMemCreate", &fn, 0, &st), cudaSuccess);
    PFN(cuMemCreate) create = (PFN(cuMemCreate))fn;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CHECK(create(&h, 1024 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    return 0;
}

static int async(void)
{
    void *p;
    CHECK(cudaMallocAsync(&p, 1024 * MiB, NULL), cudaErrorMemoryAllocation);
    return 0;
}

static int several(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 1001 * MiB), cudaErrorMemoryAllocation);
    CHECK(cudaMalloc(&p, 1002 * MiB), cudaErrorMemoryAllocation);
    CHECK(cudaMalloc(&p, 1003 * MiB), cudaErrorMemoryAllocation);
    return 0;
}

/* Two chains of two attempts each: each post-mortem is rewritten when its
 * chain ends, which must not cost a file number. */
static int retried_chains(void)
{
    void *p;
    for (int chain = 0; chain < 2; chain++)
        for (int attempt = 0; attempt < 2; attempt++)
            CHECK(cudaMalloc(&p, (size_t)(1001 + chain) * MiB), cudaErrorMemoryAllocation);
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* An OOM retry loop with many live allocations: `live` small allocations,
 * then the same impossible request `attempts` times.  Prints the first
 * attempt's time and the others' total, for the cost test. */
static int retry_loop(int live, int attempts)
{
    void *p;
    for (int i = 0; i < live; i++)
        CHECK(cudaMalloc(&p, 512), cudaSuccess);
    int64_t t0 = now_ns();
    CHECK(cudaMalloc(&p, 1024 * MiB), cudaErrorMemoryAllocation);
    int64_t t1 = now_ns();
    for (int i = 1; i < attempts; i++)
        CHECK(cudaMalloc(&p, 1024 * MiB), cudaErrorMemoryAllocation);
    int64_t t2 = now_ns();
    printf("first_ns %lld retries_ns %lld\n", (long long)(t1 - t0), (long long)(t2 - t1));
    if (getenv("RETRY_THEN_ALLOC")) /* a different request: the chain gives up */
        CHECK(cudaMalloc(&p, 512), cudaSuccess);
    return 0;
}

/* A request `mib` MiB more than the device has free, after 40 MiB: the
 * shortfall is exactly that (advice on memory outside us). */
static int short_by(int mib)
{
    void *p;
    size_t f, t;
    CHECK(cudaMalloc(&p, 40 * MiB), cudaSuccess);
    CHECK(cudaMemGetInfo(&f, &t), cudaSuccess);
    CHECK(cudaMalloc(&p, f + (size_t)mib * MiB), cudaErrorMemoryAllocation);
    return 0;
}

/* Retry chains that recover, as a caching allocator makes them: `live`
 * small allocations and a 120 MiB reserve; then `n` times a 100 MiB request
 * fails, the reserve is freed, the retry succeeds, and both go back.
 * Prints the first chain's time and the others' total.  Then
 * RECOVER_LOOP_END=fail: a 1 GiB request fails twice (a chain that gives
 * up); =once: a 1 GiB request fails once, and the process exits. */
static int recover_loop(int live, int n)
{
    void *p, *reserve;
    for (int i = 0; i < live; i++)
        CHECK(cudaMalloc(&p, 512), cudaSuccess);
    CHECK(cudaMalloc(&reserve, 120 * MiB), cudaSuccess);
    int64_t first = 0, rest = 0;
    for (int i = 0; i < n; i++) {
        int64_t t0 = now_ns();
        CHECK(cudaMalloc(&p, 100 * MiB), cudaErrorMemoryAllocation);
        (void)cudaGetLastError();
        CHECK(cudaFree(reserve), cudaSuccess);
        CHECK(cudaMalloc(&p, 100 * MiB), cudaSuccess);
        int64_t t = now_ns() - t0;
        CHECK(cudaFree(p), cudaSuccess);
        CHECK(cudaMalloc(&reserve, 120 * MiB), cudaSuccess);
        if (i == 0)
            first = t;
        else
            rest += t;
    }
    printf("first_ns %lld rest_ns %lld\n", (long long)first, (long long)rest);
    const char *end = getenv("RECOVER_LOOP_END");
    if (end != NULL) {
        CHECK(cudaMalloc(&p, 1024 * MiB), cudaErrorMemoryAllocation);
        if (strcmp(end, "fail") == 0) {
            CHECK(cudaMalloc(&p, 1024 * MiB), cudaErrorMemoryAllocation);
            CHECK(cudaMalloc(&p, 512), cudaSuccess); /* another request: it gave up */
        }
    }
    return 0;
}

/* `n` failures of different sizes: n chains of one attempt each. */
static int distinct(int n)
{
    void *p;
    for (int i = 0; i < n; i++)
        CHECK(cudaMalloc(&p, (size_t)(1024 + i) * MiB), cudaErrorMemoryAllocation);
    return 0;
}

/* One run's directory as a job leaves it: the "fail" post-mortem, then
 * `dumps` snapshots on the way (cumemtrace_dump, as a program's own
 * checkpoints would take them), with nothing moving in between, then
 * `hold_ms` more of nothing (periodic snapshots, when asked for), then the
 * exit snapshot. */
static int fail_then_dumps(int dumps, int hold_ms)
{
    int (*dump)(const char *) = NULL;
    *(void **)&dump = dlsym(RTLD_DEFAULT, "cumemtrace_dump");
    if (caching(0) != 0)
        return 1;
    for (int i = 0; i < dumps; i++)
        if (dump == NULL || dump(NULL) != 0)
            return fprintf(stderr, "cumemtrace_dump failed\n"), 1;
    struct timespec t = {hold_ms / 1000, (long)(hold_ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    if (strcmp(s, "recover") == 0)
        return caching(1);
    if (strcmp(s, "fail") == 0)
        return caching(0);
    if (strcmp(s, "fragment") == 0)
        return fragment();
    if (strcmp(s, "exhaust") == 0)
        return exhaust();
    if (strcmp(s, "limit") == 0)
        return limit();
    if (strcmp(s, "vmm") == 0)
        return vmm();
    if (strcmp(s, "async") == 0)
        return async();
    if (strcmp(s, "several") == 0)
        return several();
    if (strcmp(s, "retried_chains") == 0)
        return retried_chains();
    if (strcmp(s, "retry_loop") == 0 && argc > 3)
        return retry_loop(atoi(argv[2]), atoi(argv[3]));
    if (strcmp(s, "short") == 0 && argc > 2)
        return short_by(atoi(argv[2]));
    if (strcmp(s, "recover_loop") == 0 && argc > 3)
        return recover_loop(atoi(argv[2]), atoi(argv[3]));
    if (strcmp(s, "fail_then_dumps") == 0 && argc > 3)
        return fail_then_dumps(atoi(argv[2]), atoi(argv[3]));
    if (strcmp(s, "distinct") == 0 && argc > 2)
        return distinct(atoi(argv[2]));
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
}
