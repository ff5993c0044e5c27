/* bench_alloc.c - the workloads `make bench` times (scripts/bench.py runs
 * each one bare and under LD_PRELOAD, interleaved, and compares).
 *
 *   bench_alloc pair PATH DEPTH THREADS ITERS [ORDER]   ns per allocation and
 *       per free, and the wall and CPU time of all THREADS' loops (ITERS
 *       pairs each)
 *       PATH: runtime (cudaMalloc/cudaFree), driver (cuMemAlloc_v2/
 *       cuMemFree_v2), async (cudaMallocAsync/cudaFreeAsync),
 *       vmm (cuMemCreate+cuMemMap / cuMemUnmap+cuMemRelease)
 *       ORDER: fifo (the default: a batch of 64 is freed in the order it
 *       was allocated, all of 4 KiB), lifo (freed newest first), fifo-varied
 *       and lifo-varied (sizes from 256 B to 8 MiB, 16 of them in turn),
 *       fifo-wide and fifo-varied-wide (batches of 256); not vmm
 *   bench_alloc floor DEPTH ITERS               unw_backtrace + insert/find/delete
 *   bench_alloc malloc DEPTH ITERS              malloc/free pairs (for heaptrack)
 *   bench_alloc live N                          N live allocations, 1 stack
 *   bench_alloc stacks N                        N distinct stacks, 1 live each
 *   bench_alloc dump NALLOC NSTACKS FILE        time cumemtrace_dump() (wall and CPU)
 *   bench_alloc sites PATTERN ITERS             cudaMalloc/cudaFree pairs from call
 *       sites in turn (sites_loop): one, apart (2 whose return addresses lie
 *       in different sets of the unwinder's rule cache), collide (2 in the
 *       same set), four (4 in different sets)
 *   bench_alloc rate EVENTS_PER_S SECONDS       cudaMalloc/cudaFree paced at that
 *       rate (an allocation and a free are two events) beside LIVE live ones
 *       from 16 call sites; prints the CPU time of the tracer's own thread
 *       (named "cumemtrace") over the run
 *
 * Output is one line of "key=value" pairs.  Each call site runs at a chosen
 * stack depth: descend() recurses that many frames before the loop.
 *
 * pair, floor and malloc hold LIVE allocations (table entries) for the whole
 * run, so the tracer's table and the floor's table are the same size, and
 * each times its loop in one noinline function (pair_loop, floor_loop,
 * malloc_loop) that callgrind --toggle-collect counts alone; the free side
 * of each batch is its own function (pair_frees, floor_frees, malloc_frees)
 * so its inclusive instruction count can be read apart.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "cuda_api.h"

#include "../../src/preload/stacks/cfi.h" /* cfi_set: the sites pattern */

#define PFN(sym) __typeof__(&sym)

#define BATCH 64
#define WIDE 256 /* pair's wide orders: a window of this many allocations */
#define LIVE 1000 /* entries held live beside each batch */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef void (*body_fn)(void *);

/* Recurses `depth` frames, then runs body; the volatile keeps every frame. */
__attribute__((noinline)) static void descend(int depth, body_fn body, void *arg)
{
    volatile int guard = depth;
    if (depth > 0)
        descend(depth - 1, body, arg);
    else
        body(arg);
    (void)guard;
}

/* ---- alloc/free pairs ---- */

struct pair_args {
    const char *path;
    const char *order;
    long iters;
    int depth;
    double alloc_s, free_s;
    double start, end; /* now() when this thread's loop began, ended */
    double cpu_s; /* this thread's CPU time in its loop */
};

/* Every thread's loop starts together, after every live set is in place:
 * the run's wall time is from then to the last loop's end. */
static pthread_barrier_t loops_start;

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static PFN(cuMemAlloc_v2) drv_alloc;
static PFN(cuMemFree_v2) drv_free;
static PFN(cuMemCreate) vmm_create;
static PFN(cuMemRelease) vmm_release;
static PFN(cuMemMap) vmm_map;
static PFN(cuMemUnmap) vmm_unmap;
static PFN(cuMemAddressReserve) vmm_reserve;

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    if (cudaGetDriverEntryPoint(name, &fn, 0, &st) != cudaSuccess || !fn) {
        fprintf(stderr, "bench_alloc: no driver entry point %s\n", name);
        exit(1);
    }
    return fn;
}

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "bench_alloc: %s failed\n", what);
        exit(1);
    }
}

/* ORDER's varied sizes: small and large, round and not, as a model's
 * tensors are. */
static const size_t varied_sizes[16] = {
    4096,    512,       2u << 20, 1000,    65536, 3u << 20, 24576,  256,
    1u << 20, 8u << 20, 12288,    300000,  49152, 1536,     6u << 20, 131072};

struct pair_state {
    int path;
    bool lifo;   /* free a batch newest first */
    bool varied; /* varied_sizes in turn, else 4 KiB each */
    int batch;   /* allocations before they are freed: BATCH, or WIDE */
    void *p[WIDE];
    CUdeviceptr d[WIDE];
    CUmemGenericAllocationHandle h[WIDE];
    CUdeviceptr va;
    CUmemAllocationProp prop;
};

__attribute__((noinline)) static void pair_allocs(struct pair_state *s)
{
    for (int i = 0; i < s->batch; i++) {
        size_t n = s->varied ? varied_sizes[i % 16] : 4096;
        switch (s->path) {
        case 0: must(cudaMalloc(&s->p[i], n) == cudaSuccess, "cudaMalloc"); break;
        case 1: must(drv_alloc(&s->d[i], n) == CUDA_SUCCESS, "cuMemAlloc_v2"); break;
        case 2: must(cudaMallocAsync(&s->p[i], n, NULL) == cudaSuccess, "cudaMallocAsync"); break;
        default:
            must(vmm_create(&s->h[i], 2u << 20, &s->prop, 0) == CUDA_SUCCESS, "cuMemCreate");
            must(vmm_map(s->va + (CUdeviceptr)i * (2u << 20), 2u << 20, 0, s->h[i], 0)
                     == CUDA_SUCCESS, "cuMemMap");
        }
    }
}

__attribute__((noinline)) static void pair_frees(struct pair_state *s)
{
    for (int k = 0; k < s->batch; k++) {
        int i = s->lifo ? s->batch - 1 - k : k;
        switch (s->path) {
        case 0: must(cudaFree(s->p[i]) == cudaSuccess, "cudaFree"); break;
        case 1: must(drv_free(s->d[i]) == CUDA_SUCCESS, "cuMemFree_v2"); break;
        case 2: must(cudaFreeAsync(s->p[i], NULL) == cudaSuccess, "cudaFreeAsync"); break;
        default:
            must(vmm_unmap(s->va + (CUdeviceptr)i * (2u << 20), 2u << 20)
                     == CUDA_SUCCESS, "cuMemUnmap");
            must(vmm_release(s->h[i]) == CUDA_SUCCESS, "cuMemRelease");
        }
    }
}

__attribute__((noinline)) static void pair_loop(struct pair_args *a, struct pair_state *s)
{
    for (long it = 0; it < a->iters; it += s->batch) {
        double t0 = now();
        pair_allocs(s);
        double t1 = now();
        pair_frees(s);
        double t2 = now();
        a->alloc_s += t1 - t0;
        a->free_s += t2 - t1;
    }
}

static void pair_body(void *arg)
{
    struct pair_args *a = arg;
    struct pair_state s;
    memset(&s, 0, sizeof s);
    s.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    s.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    s.path = a->path[0] == 'r' ? 0 : a->path[0] == 'd' ? 1 : a->path[0] == 'a' ? 2 : 3;
    s.lifo = strncmp(a->order, "lifo", 4) == 0;
    s.varied = strstr(a->order, "varied") != NULL && s.path != 3;
    s.batch = strstr(a->order, "wide") != NULL && s.path != 3 ? WIDE : BATCH;
    must(cudaFree(NULL) == cudaSuccess, "cudaFree(NULL)"); /* this thread's context */
    if (s.path == 3)
        must(vmm_reserve(&s.va, BATCH * (2u << 20), 0, 0, 0) == CUDA_SUCCESS, "reserve");
    /* LIVE allocations from this same call site stay live throughout */
    void **live = malloc(LIVE * sizeof *live);
    for (int i = 0; i < LIVE; i++)
        must(cudaMalloc(&live[i], 4096) == cudaSuccess, "cudaMalloc (live set)");
    pthread_barrier_wait(&loops_start);
    a->start = now();
    double c0 = thread_cpu();
    pair_loop(a, &s);
    a->cpu_s = thread_cpu() - c0;
    a->end = now();
    for (int i = 0; i < LIVE; i++)
        cudaFree(live[i]);
    free(live);
}

static void *pair_thread(void *arg)
{
    struct pair_args *a = arg;
    descend(a->depth, pair_body, a);
    return NULL;
}

static int run_pairs(const char *path, int depth, int threads, long iters, const char *order)
{
    static const char *const orders[] = {"fifo", "lifo", "fifo-varied", "lifo-varied",
                                         "fifo-wide", "fifo-varied-wide"};
    bool known = false;
    for (size_t i = 0; i < sizeof orders / sizeof *orders; i++)
        known |= strcmp(order, orders[i]) == 0;
    if (!known) {
        fprintf(stderr, "bench_alloc: ORDER %s: expected fifo, lifo, fifo-varied, "
                        "lifo-varied, fifo-wide or fifo-varied-wide\n", order);
        return 2;
    }
    long batch = strstr(order, "wide") != NULL && path[0] != 'v' ? WIDE : BATCH;
    void *warm;
    must(cudaMalloc(&warm, 512) == cudaSuccess, "warm-up");
    cudaFree(warm);
    if (path[0] != 'r') { /* fastrt.c, the stand-in runtime, has no driver */
        drv_alloc = (PFN(cuMemAlloc_v2))entry("cuMemAlloc");
        drv_free = (PFN(cuMemFree_v2))entry("cuMemFree");
        vmm_create = (PFN(cuMemCreate))entry("cuMemCreate");
        vmm_release = (PFN(cuMemRelease))entry("cuMemRelease");
        vmm_map = (PFN(cuMemMap))entry("cuMemMap");
        vmm_unmap = (PFN(cuMemUnmap))entry("cuMemUnmap");
        vmm_reserve = (PFN(cuMemAddressReserve))entry("cuMemAddressReserve");
    }

    struct pair_args a[16];
    pthread_t t[16];
    if (threads < 1 || threads > 16)
        return 2;
    pthread_barrier_init(&loops_start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        a[i] = (struct pair_args){path, order, iters, depth, 0, 0, 0, 0, 0};
        pthread_create(&t[i], NULL, pair_thread, &a[i]);
    }
    pthread_barrier_wait(&loops_start);
    double w0 = 0, w1 = 0, alloc_s = 0, free_s = 0, cpu = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        alloc_s += a[i].alloc_s;
        free_s += a[i].free_s;
        cpu += a[i].cpu_s;
        w0 = i == 0 || a[i].start < w0 ? a[i].start : w0;
        w1 = a[i].end > w1 ? a[i].end : w1;
    }
    pthread_barrier_destroy(&loops_start);
    double wall = w1 - w0;
    double n = (double)((iters + batch - 1) / batch * batch) * threads;
    /* wall_s: the loops, threads together (throughput = pairs / wall_s);
     * cpu_s: the CPU time of the loops, all threads */
    printf("alloc_ns=%.1f free_ns=%.1f pair_ns=%.1f pairs=%.0f wall_s=%.6f cpu_s=%.6f\n",
           alloc_s / n * 1e9, free_s / n * 1e9, (alloc_s + free_s) / n * 1e9, n, wall, cpu);
    return 0;
}

/* ---- the floor: what any stack-recording tracer must pay ---- */

struct item {
    uintptr_t key;
    UT_hash_handle hh;
};

struct floor_args {
    long iters;
    double s;
    int (*bt)(void **, int);
    int depth;
};

struct floor_state {
    struct item *table;
    struct item items[BATCH];
    void *frames[300];
};

/* What a tracer's free must do at least: find the entry, unlink it. */
__attribute__((noinline)) static void floor_frees(struct floor_state *s)
{
    struct item *found;
    for (int i = 0; i < BATCH; i++) {
        HASH_FIND(hh, s->table, &s->items[i].key, sizeof s->items[i].key, found);
        must(found != NULL, "floor find");
        HASH_DELETE(hh, s->table, found);
    }
}

/* Per allocation: one unwind of the same depth and one insert, into a table
 * holding LIVE + BATCH entries, as the tracer's does. */
__attribute__((noinline)) static void floor_loop(struct floor_args *a, struct floor_state *s)
{
    uintptr_t next = 0x200000000ull;
    for (long it = 0; it < a->iters; it += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            struct item *x = &s->items[i];
            if (a->depth > 0)
                a->bt(s->frames, a->depth);
            x->key = next ^ ((uintptr_t)s->frames[1] & 0xff0);
            next += 4096;
            HASH_ADD(hh, s->table, key, sizeof x->key, x);
        }
        floor_frees(s);
    }
}

static void floor_body(void *arg)
{
    struct floor_args *a = arg;
    struct floor_state *s = calloc(1, sizeof *s);
    struct item *bulk = calloc(LIVE, sizeof *bulk);
    for (int i = 0; i < LIVE; i++) {
        bulk[i].key = 0x100000000ull + (uintptr_t)i * 4096;
        HASH_ADD(hh, s->table, key, sizeof bulk[i].key, &bulk[i]);
    }
    double t0 = now();
    floor_loop(a, s);
    a->s = now() - t0;
    HASH_CLEAR(hh, s->table);
    free(bulk);
    free(s);
}

static int run_floor(int depth, long iters)
{
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    struct floor_args a = {iters, 0, NULL, depth};
    if (h == NULL || (*(void **)&a.bt = dlsym(h, "unw_backtrace")) == NULL)
        return fprintf(stderr, "bench_alloc: libunwind.so.8 missing\n"), 1;
    void *warm[64];
    a.bt(warm, 64);
    descend(depth, floor_body, &a);
    printf("floor_ns=%.1f pairs=%ld\n", a.s / ((iters + BATCH - 1) / BATCH * BATCH) * 1e9,
           (iters + BATCH - 1) / BATCH * BATCH);
    return 0;
}

/* ---- malloc/free pairs, the same shape, for heaptrack ---- */

struct malloc_args {
    long iters;
    double s;
};

__attribute__((noinline)) static void malloc_frees(void **p)
{
    for (int i = 0; i < BATCH; i++)
        free(p[i]);
}

__attribute__((noinline)) static void malloc_loop(struct malloc_args *a, void **p)
{
    for (long it = 0; it < a->iters; it += BATCH) {
        for (int i = 0; i < BATCH; i++)
            must((p[i] = malloc(512)) != NULL, "malloc");
        malloc_frees(p);
    }
}

static void malloc_body(void *arg)
{
    struct malloc_args *a = arg;
    void *p[BATCH];
    void **live = malloc(LIVE * sizeof *live);
    for (int i = 0; i < LIVE; i++)
        must((live[i] = malloc(512)) != NULL, "malloc (live set)");
    double t0 = now();
    malloc_loop(a, p);
    a->s = now() - t0;
    for (int i = 0; i < LIVE; i++)
        free(live[i]);
    free(live);
}

/* heaptrack attached at run time, as `heaptrack -p PID` does through gdb:
 * its inject library's heaptrack_inject(output) hooks the loaded modules'
 * PLT entries.  Its preload variant records nothing under valgrind, the
 * injected one does, so callgrind can count heaptrack's cost per pair. */
static void heaptrack_attach(void)
{
    const char *lib = getenv("BENCH_HEAPTRACK_INJECT"), *out = getenv("BENCH_HEAPTRACK_OUT");
    if (lib == NULL || out == NULL)
        return;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    void (*inject)(const char *) = h ? (void (*)(const char *))dlsym(h, "heaptrack_inject") : NULL;
    must(inject != NULL, "heaptrack_inject (BENCH_HEAPTRACK_INJECT)");
    inject(out);
}

static int run_malloc(int depth, long iters)
{
    heaptrack_attach();
    struct malloc_args a = {iters, 0};
    descend(depth, malloc_body, &a);
    long n = (iters + BATCH - 1) / BATCH * BATCH;
    printf("pair_ns=%.1f pairs=%ld\n", a.s / n * 1e9, n);
    return 0;
}

/* ---- memory cost ---- */

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

struct live_args {
    long n;
    void **ptrs;
};

static void live_body(void *arg)
{
    struct live_args *a = arg;
    for (long i = 0; i < a->n; i++)
        must(cudaMalloc(&a->ptrs[i], 512) == cudaSuccess, "cudaMalloc");
}

static int run_live(long n)
{
    struct live_args a = {n, calloc((size_t)n, sizeof(void *))};
    void *warm;
    must(cudaMalloc(&warm, 512) == cudaSuccess, "warm-up");
    size_t before = heap_in_use();
    descend(32, live_body, &a);
    size_t after = heap_in_use();
    printf("heap_bytes_per_alloc=%.1f\n", (double)(after - before) / n);
    return 0;
}

/* N distinct stacks: at each of `bits` levels take one of two functions. */
__attribute__((noinline)) static void fork_a(long code, int bits);
__attribute__((noinline)) static void fork_b(long code, int bits);

static void leaf_alloc(void)
{
    void *p;
    must(cudaMalloc(&p, 512) == cudaSuccess, "cudaMalloc");
    cudaFree(p);
}

static void fork_a(long code, int bits)
{
    volatile int g = bits;
    if (bits == 0)
        leaf_alloc();
    else if (code & 1)
        fork_b(code >> 1, bits - 1);
    else
        fork_a(code >> 1, bits - 1);
    (void)g;
}

static void fork_b(long code, int bits)
{
    volatile int g = bits;
    if (bits == 0)
        leaf_alloc();
    else if (code & 1)
        fork_b(code >> 1, bits - 1);
    else
        fork_a(code >> 1, bits - 1);
    (void)g;
}

static int bits_for(long n)
{
    int bits = 0;
    while ((1L << bits) < n)
        bits++;
    return bits;
}

static int run_stacks(long n)
{
    void *warm;
    must(cudaMalloc(&warm, 512) == cudaSuccess, "warm-up");
    int bits = bits_for(n);
    size_t before = heap_in_use();
    for (long i = 0; i < n; i++)
        fork_a(i, bits);
    size_t after = heap_in_use();
    printf("heap_bytes_per_stack=%.1f depth=%d\n", (double)(after - before) / n,
           bits + 3);
    return 0;
}

/* ---- dump ---- */

static void live_fork_a(long code, int bits, void **out);
static void live_fork_b(long code, int bits, void **out);

static void live_fork_a(long code, int bits, void **out)
{
    volatile int g = bits;
    if (bits == 0)
        must(cudaMalloc(out, 512) == cudaSuccess, "cudaMalloc");
    else if (code & 1)
        live_fork_b(code >> 1, bits - 1, out);
    else
        live_fork_a(code >> 1, bits - 1, out);
    (void)g;
}

static void live_fork_b(long code, int bits, void **out)
{
    volatile int g = bits;
    if (bits == 0)
        must(cudaMalloc(out, 512) == cudaSuccess, "cudaMalloc");
    else if (code & 1)
        live_fork_b(code >> 1, bits - 1, out);
    else
        live_fork_a(code >> 1, bits - 1, out);
    (void)g;
}

/* ---- call sites that share the unwinder's rule cache ---- */

/* 512 call sites, each a function of its own (aligned, with 0-60 bytes of
 * padding that differ from site to site, so that their return addresses
 * spread over the cache's sets; the padding squares the site's number, so
 * that sites 8 KiB apart differ by varied amounts); each calls through sites_fn,
 * so the same call returns to the same address whether it probes (at
 * start: which address is it?) or allocates. */
typedef cudaError_t (*sites_alloc_fn)(void **, size_t);
static sites_alloc_fn sites_fn;
static uintptr_t sites_probed;

static cudaError_t sites_probe(void **p, size_t n)
{
    (void)n;
    *p = NULL;
    sites_probed = (uintptr_t)__builtin_return_address(0);
    return cudaSuccess;
}

#define SITE(id)                                                                 \
    __attribute__((noinline, aligned(128))) static void site_##id(void **p)     \
    {                                                                            \
        __asm__ volatile(".skip (" #id " * " #id " * 37) % 61 + 1, 0x90");       \
        must(sites_fn(p, 4096) == cudaSuccess, "cudaMalloc (site)");              \
    }
#define SITE8(a, b) SITE(a##b##1) SITE(a##b##2) SITE(a##b##3) SITE(a##b##4) \
    SITE(a##b##5) SITE(a##b##6) SITE(a##b##7) SITE(a##b##8)
#define SITE64(a) SITE8(a, 1) SITE8(a, 2) SITE8(a, 3) SITE8(a, 4) SITE8(a, 5) \
    SITE8(a, 6) SITE8(a, 7) SITE8(a, 8)
SITE64(1) SITE64(2) SITE64(3) SITE64(4) SITE64(5) SITE64(6) SITE64(7) SITE64(8)
#define NAME8(a, b) site_##a##b##1, site_##a##b##2, site_##a##b##3, site_##a##b##4, \
    site_##a##b##5, site_##a##b##6, site_##a##b##7, site_##a##b##8
#define NAME64(a) NAME8(a, 1), NAME8(a, 2), NAME8(a, 3), NAME8(a, 4), NAME8(a, 5), \
    NAME8(a, 6), NAME8(a, 7), NAME8(a, 8)
static void (*const site_fns[512])(void **) = {NAME64(1), NAME64(2), NAME64(3), NAME64(4),
                                               NAME64(5), NAME64(6), NAME64(7), NAME64(8)};

struct sites_state {
    void (*use[4])(void **); /* the sites, in turn */
    unsigned n;
    void *p[BATCH];
};

__attribute__((noinline)) static void sites_frees(struct sites_state *s)
{
    for (int i = 0; i < BATCH; i++)
        must(cudaFree(s->p[i]) == cudaSuccess, "cudaFree");
}

__attribute__((noinline)) static void sites_loop(struct sites_state *s, long iters)
{
    for (long it = 0; it < iters; it += BATCH) {
        for (int i = 0; i < BATCH; i++)
            s->use[(unsigned)i % s->n](&s->p[i]);
        sites_frees(s);
    }
}

/* The sites of PATTERN: one; apart (2 in different sets of the rule
 * cache); collide (2 in the same set: CFI_WAYS ways hold both); four (4
 * in different sets). */
static int run_sites(const char *pattern, long iters)
{
    uintptr_t ra[512];
    sites_fn = sites_probe;
    for (int i = 0; i < 512; i++) {
        void *p;
        site_fns[i](&p);
        ra[i] = sites_probed;
    }
    sites_fn = cudaMalloc;
    struct sites_state s;
    memset(&s, 0, sizeof s);
    int want = strcmp(pattern, "one") == 0 ? 1 : strcmp(pattern, "four") == 0 ? 4 : 2;
    bool same = strcmp(pattern, "collide") == 0;
    if (want == 2 && !same && strcmp(pattern, "apart") != 0) {
        fprintf(stderr, "bench_alloc: sites %s: expected one, apart, collide or four\n",
                pattern);
        return 2;
    }
    int pick[4] = {0}, n = 0;
    for (int i = 0; i < 512 && n < want; i++) {
        if (same) { /* the first two sites that share a set */
            for (int j = i + 1; j < 512 && n < want; j++)
                if (cfi_set(ra[i]) == cfi_set(ra[j]))
                    pick[0] = i, pick[1] = j, n = 2;
            continue;
        }
        bool apart = true;
        for (int j = 0; j < n; j++)
            apart &= cfi_set(ra[i]) != cfi_set(ra[pick[j]]);
        if (apart)
            pick[n++] = i;
    }
    if (n < want) {
        fprintf(stderr, "bench_alloc: sites %s: no such sites in this layout\n", pattern);
        return 1;
    }
    for (int j = 0; j < n; j++)
        s.use[j] = site_fns[pick[j]];
    s.n = (unsigned)n;
    void *warm;
    must(cudaMalloc(&warm, 512) == cudaSuccess, "warm-up");
    cudaFree(warm);
    sites_loop(&s, BATCH); /* every site's stack and rules seen once */
    double t0 = now();
    sites_loop(&s, iters);
    double t = now() - t0;
    long pairs = (iters + BATCH - 1) / BATCH * BATCH;
    printf("pair_ns=%.1f pairs=%ld sites=%d", t / pairs * 1e9, pairs, n);
    for (int j = 0; j < n; j++)
        printf(" set%d=%u", j, cfi_set(ra[pick[j]]));
    printf("\n");
    return 0;
}

static int run_dump(long nalloc, long nstacks, const char *file)
{
    int (*dump)(const char *);
    *(void **)&dump = dlsym(RTLD_DEFAULT, "cumemtrace_dump");
    if (dump == NULL)
        return fprintf(stderr, "bench_alloc: run under LD_PRELOAD\n"), 1;
    void **p = malloc((size_t)nalloc * sizeof *p);
    int bits = bits_for(nstacks);
    for (long i = 0; i < nalloc; i++)
        live_fork_a(i % nstacks, bits, &p[i]);
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    double t0 = now();
    int r = dump(file);
    double t1 = now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    /* CPU: the dump runs on this thread; less moved by a loaded machine */
    printf("dump_s=%.3f dump_cpu_s=%.3f ok=%d\n", t1 - t0,
           (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9, r == 0);
    return r == 0 ? 0 : 1;
}

/* ---- the tracer's thread at a steady event rate ---- */

/* CPU seconds of this process's thread named `name`, -1 if none.  Linux's
 * per-thread CPU clock of another thread: MAKE_THREAD_CPUCLOCK(tid,
 * CPUCLOCK_SCHED), ns resolution where /proc's ticks have 10 ms. */
static double named_thread_cpu(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    double cpu = -1;
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) == NULL)
            comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (strcmp(comm, name) != 0)
            continue;
        clockid_t cid = (clockid_t)((~(unsigned)atoi(e->d_name) << 3) | 6);
        struct timespec ts;
        if (clock_gettime(cid, &ts) == 0)
            cpu = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    if (d != NULL)
        closedir(d);
    return cpu;
}

__attribute__((noinline)) static void rate_site(int site, void **out)
{
    volatile int s = site; /* one call site per value: 16 stacks */
    switch (s & 15) {
    case 0: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    case 1: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    case 2: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    case 3: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    case 4: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    case 5: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    case 6: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    case 7: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    case 8: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    case 9: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    case 10: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    case 11: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    case 12: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    case 13: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    case 14: must(cudaMalloc(out, 4096) == cudaSuccess, "cudaMalloc"); break;
    default: must(cudaMalloc(out, 8192) == cudaSuccess, "cudaMalloc"); break;
    }
}

static int run_rate(double events_per_s, double seconds)
{
    void **live = malloc(LIVE * sizeof *live);
    for (int i = 0; i < LIVE; i++)
        rate_site(i, &live[i]);
    void *p[BATCH];
    /* a batch is BATCH allocations and BATCH frees */
    double batch_s = 2.0 * BATCH / events_per_s;
    double cpu0 = named_thread_cpu("cumemtrace");
    double t0 = now(), due = t0;
    long events = 0;
    while (now() - t0 < seconds) {
        for (int i = 0; i < BATCH; i++)
            rate_site(i, &p[i]);
        for (int i = 0; i < BATCH; i++)
            cudaFree(p[i]);
        events += 2 * BATCH;
        due += batch_s;
        double wait = due - now();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    double wall = now() - t0;
    double cpu1 = named_thread_cpu("cumemtrace");
    for (int i = 0; i < LIVE; i++)
        cudaFree(live[i]);
    free(live);
    printf("events=%ld wall_s=%.3f events_per_s=%.0f thread_cpu_s=%.6f thread=%d\n", events,
           wall, events / wall, cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : 0.0, cpu1 >= 0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "pair") == 0)
        return run_pairs(argv[2], atoi(argv[3]), atoi(argv[4]), atol(argv[5]),
                         argc >= 7 ? argv[6] : "fifo");
    if (argc >= 4 && strcmp(argv[1], "floor") == 0)
        return run_floor(atoi(argv[2]), atol(argv[3]));
    if (argc >= 4 && strcmp(argv[1], "malloc") == 0)
        return run_malloc(atoi(argv[2]), atol(argv[3]));
    if (argc >= 3 && strcmp(argv[1], "live") == 0)
        return run_live(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "stacks") == 0)
        return run_stacks(atol(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "rate") == 0)
        return run_rate(atof(argv[2]), atof(argv[3]));
    if (argc >= 4 && strcmp(argv[1], "sites") == 0)
        return run_sites(argv[2], atol(argv[3]));
    if (argc >= 5 && strcmp(argv[1], "dump") == 0)
        return run_dump(atol(argv[2]), atol(argv[3]), argv[4]);
    fprintf(stderr, "usage: see the comment at the top of bench_alloc.c\n");
    return 2;
}
