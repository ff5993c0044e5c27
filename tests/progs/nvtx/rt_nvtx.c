/* rt_nvtx.c - a CUDA program annotated with NVIDIA's NVTX 3, built against
 * the toolkit's header-only NVTX (tests/nvtx.mk; no library to link): what
 * the phase tests (tests/e2e/test_phases.py) run under the preload with
 * NVTX_INJECTION64_PATH pointing at libcumemtrace.so.
 *
 *   rt_nvtx nested      train/step 1 (1 MiB) then validation/step 1200
 *                       (3 MiB + 2 MiB: the peak, 6 MiB with the 1 MiB
 *                       kept); a mark; a domain "io" with a registered
 *                       string (4 MiB, freed); wide names
 *   rt_nvtx threads     a start/end range "request 7" started here, ended on
 *                       another thread; 2 MiB allocated inside it, 1 MiB after
 *   rt_nvtx unbalanced  pops with nothing open, a pop of another domain,
 *                       then a balanced range (1 MiB)
 *   rt_nvtx many N      N distinct names, one 4 KiB allocation and free in
 *                       each, then "after" (1 MiB, kept)
 *   rt_nvtx oom         validation/step 1200 asks for more than the device
 *   rt_nvtx deep        80 nested ranges, 1 MiB in the innermost
 *   rt_nvtx deep_starts 70 start/end ranges "request" in flight (6 past
 *                       the 64 a thread keeps), all ended in the order
 *                       started, then 1 MiB (in no range) and a push
 *                       "after" with 2 MiB in it
 *   rt_nvtx stress      4 threads push, allocate, free and pop 5000 times
 *                       each while another ends their start/end ranges and
 *                       the main thread dumps (for ThreadSanitizer)
 * Prints each push's and pop's result as "label: value". */
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "progs.h"

__attribute__((noinline)) static void *alloc_in(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

static int nested(void)
{
    printf("push train: %d\n", nvtxRangePushA("train"));
    printf("push step: %d\n", nvtxRangePushA("step 1"));
    void *a = alloc_in(1 * MiB);
    printf("pop step: %d\n", nvtxRangePop());
    printf("pop train: %d\n", nvtxRangePop());
    nvtxMarkA("checkpoint");
    nvtxRangePushA("validation");
    nvtxRangePushA("step 1200");
    void *b = alloc_in(3 * MiB);
    void *c = alloc_in(2 * MiB);
    CHECK(cudaFree(b), cudaSuccess);
    CHECK(cudaFree(c), cudaSuccess);
    nvtxRangePop();
    nvtxRangePop();

    nvtxDomainHandle_t io = nvtxDomainCreateA("io");
    nvtxStringHandle_t load = nvtxDomainRegisterStringA(io, "load batch");
    nvtxEventAttributes_t at;
    memset(&at, 0, sizeof at);
    at.version = NVTX_VERSION;
    at.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    at.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    at.message.registered = load;
    printf("push io: %d\n", nvtxDomainRangePushEx(io, &at));
    void *d = alloc_in(4 * MiB);
    CHECK(cudaFree(d), cudaSuccess);
    printf("pop io: %d\n", nvtxDomainRangePop(io));

    nvtxRangePushW(L"wide \u00e9t\u00e9");
    void *e = alloc_in(1 * MiB);
    CHECK(cudaFree(e), cudaSuccess);
    nvtxRangePop();
    (void)a; /* kept: live at exit under train/step 1 */
    return 0;
}

static nvtxRangeId_t request;

static void *ender(void *unused)
{
    (void)unused;
    nvtxRangeEnd(request);
    return NULL;
}

static int threads(void)
{
    request = nvtxRangeStartA("request 7");
    void *a = alloc_in(2 * MiB);
    pthread_t t;
    pthread_create(&t, NULL, ender, NULL);
    pthread_join(t, NULL);
    void *b = alloc_in(1 * MiB); /* the range has ended: outside it */
    (void)a;
    (void)b;
    return 0;
}

static int unbalanced(void)
{
    printf("pop empty: %d\n", nvtxRangePop());
    printf("pop empty again: %d\n", nvtxRangePop());
    nvtxDomainHandle_t other = nvtxDomainCreateA("other");
    printf("push: %d\n", nvtxRangePushA("balanced"));
    printf("pop other: %d\n", nvtxDomainRangePop(other));
    void *a = alloc_in(1 * MiB);
    printf("pop: %d\n", nvtxRangePop());
    (void)a;
    return 0;
}

static int many(int n)
{
    char name[64];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "item %d", i);
        nvtxRangePushA(name);
        void *p = alloc_in(4096);
        CHECK(cudaFree(p), cudaSuccess);
        nvtxRangePop();
    }
    nvtxRangePushA("after");
    void *a = alloc_in(1 * MiB);
    nvtxRangePop();
    (void)a;
    return 0;
}

static int oom(void)
{
    nvtxRangePushA("validation");
    nvtxRangePushA("step 1200");
    void *p = NULL;
    int r = cudaMalloc(&p, (size_t)1 << 40);
    printf("oom: %d\n", r);
    nvtxRangePop();
    nvtxRangePop();
    return r == cudaErrorMemoryAllocation ? 0 : 1;
}

static int deep(void)
{
    char name[32];
    for (int i = 0; i < 80; i++) {
        snprintf(name, sizeof name, "level %d", i);
        nvtxRangePushA(name);
    }
    void *a = alloc_in(1 * MiB);
    int last = 0;
    for (int i = 0; i < 80; i++)
        last = nvtxRangePop();
    printf("last pop: %d\n", last);
    (void)a;
    return 0;
}

static int deep_starts(void)
{
    nvtxRangeId_t id[70];
    for (int i = 0; i < 70; i++)
        id[i] = nvtxRangeStartA("request");
    for (int i = 0; i < 70; i++)
        nvtxRangeEnd(id[i]);
    void *outside = alloc_in(1 * MiB);
    printf("push after: %d\n", nvtxRangePushA("after"));
    void *after = alloc_in(2 * MiB);
    printf("pop after: %d\n", nvtxRangePop());
    (void)outside, (void)after;
    return 0;
}

#define STRESS_THREADS 4
#define STRESS_ITERS 5000
static nvtxRangeId_t started[STRESS_THREADS];
static int stress_done;

static void *stress_worker(void *arg)
{
    int k = (int)(long)arg;
    char name[32];
    for (int i = 0; i < STRESS_ITERS; i++) {
        snprintf(name, sizeof name, "worker %d", k);
        nvtxRangePushA(name);
        nvtxRangePushA(i % 2 ? "odd" : "even");
        if (i % 100 == 0)
            __atomic_store_n(&started[k], nvtxRangeStartA("batch"), __ATOMIC_RELEASE);
        void *p = alloc_in(4096);
        CHECK(cudaFree(p), cudaSuccess);
        nvtxRangePop();
        nvtxRangePop();
    }
    return NULL;
}

static void *stress_ender(void *unused)
{
    (void)unused;
    while (!__atomic_load_n(&stress_done, __ATOMIC_ACQUIRE))
        for (int k = 0; k < STRESS_THREADS; k++) {
            nvtxRangeId_t id = __atomic_exchange_n(&started[k], 0, __ATOMIC_ACQ_REL);
            if (id != 0)
                nvtxRangeEnd(id);
        }
    return NULL;
}

static int stress(void)
{
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_dump");
    pthread_t w[STRESS_THREADS], e;
    /* NVTX's own start-up (its function table) and the tracer's (the first
     * CUDA call) happen here, before the threads: what is stressed is the
     * ranges, not those */
    nvtxRangePushA("start");
    nvtxRangePop();
    CHECK(cudaFree(alloc_in(4096)), cudaSuccess);
    pthread_create(&e, NULL, stress_ender, NULL);
    for (long k = 0; k < STRESS_THREADS; k++)
        pthread_create(&w[k], NULL, stress_worker, (void *)k);
    for (int i = 0; i < 3 && dump != NULL; i++)
        dump(NULL);
    for (int k = 0; k < STRESS_THREADS; k++)
        pthread_join(w[k], NULL);
    __atomic_store_n(&stress_done, 1, __ATOMIC_RELEASE);
    pthread_join(e, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "nested";
    if (strcmp(mode, "nested") == 0)
        return nested();
    if (strcmp(mode, "threads") == 0)
        return threads();
    if (strcmp(mode, "unbalanced") == 0)
        return unbalanced();
    if (strcmp(mode, "many") == 0 && argc > 2)
        return many(atoi(argv[2]));
    if (strcmp(mode, "oom") == 0)
        return oom();
    if (strcmp(mode, "deep") == 0)
        return deep();
    if (strcmp(mode, "deep_starts") == 0)
        return deep_starts();
    if (strcmp(mode, "stress") == 0)
        return stress();
    fprintf(stderr, "rt_nvtx: unknown mode '%s'\n", mode);
    return 2;
}
