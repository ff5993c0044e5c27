/* rt_concurrency.c - the hostile cases of issue 10 for the preloaded
 * library's own state: frees with the wrong API, a thread cancelled inside
 * an allocation, allocations from a signal handler, many short threads.
 * Usage: rt_concurrency MODE [ARGS]; prints what the application saw, so a
 * run with the preload can be compared with one without. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "progs.h"

/* cudaFree on pinned host memory and cudaFreeHost on device memory: the
 * runtime refuses both; the allocations stay live and are freed properly. */
static int wrongfree(void)
{
    void *d = NULL, *h = NULL;
    CHECK(cudaMalloc(&d, 2 * MiB), cudaSuccess);
    CHECK(cudaMallocHost(&h, 8192), cudaSuccess);
    int r1 = cudaFree(h);
    int r2 = cudaFreeHost(d);
    printf("cudaFree(host) %d cudaFreeHost(device) %d\n", r1, r2);
    CHECK(cudaFreeHost(h), cudaSuccess);
    CHECK(cudaFree(d), cudaSuccess);
    return 0;
}

/* A thread cancelled inside the real cudaMalloc (SIMCUDA_WAIT_BYTES makes
 * the simulated driver wait for it in pause()); under CUMEMTRACE_LIMIT the
 * next request that fits must still be granted. */
static void *cancelled_thread(void *arg)
{
    void *p = NULL;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    cudaMalloc(&p, (size_t)arg); /* never returns: cancelled in pause() */
    return NULL;
}

static int cancel(size_t wait_bytes, size_t then_bytes)
{
    void *p = NULL;
    CHECK(cudaFree(0), cudaSuccess); /* the runtime is up */
    pthread_t t;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old); /* inherited */
    pthread_create(&t, NULL, cancelled_thread, (void *)wait_bytes);
    pthread_setcancelstate(old, NULL);
    pthread_cancel(t);
    void *ret = NULL;
    pthread_join(t, &ret);
    printf("cancelled %d\n", ret == PTHREAD_CANCELED);
    int r = cudaMalloc(&p, then_bytes);
    printf("then cudaMalloc %d\n", r);
    if (r == cudaSuccess)
        CHECK(cudaFree(p), cudaSuccess);
    return 0;
}

/* One short-lived thread: one allocation and its free, or (oom) one
 * request the device cannot hold. */
static void *short_thread(void *arg)
{
    void *p = NULL;
    if (arg != NULL) {
        CHECK(cudaMalloc(&p, 1ull << 50), cudaErrorMemoryAllocation);
        return NULL;
    }
    CHECK(cudaMalloc(&p, 4096), cudaSuccess);
    CHECK(cudaFree(p), cudaSuccess);
    return NULL;
}

/* This process's resident set, in KiB (-1 if it cannot be read). */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kib;
}

/* N threads one after the other (each joined before the next starts);
 * oom: prints the resident set after the first fifth and at the end. */
static int threads(int n, int oom)
{
    void *p = NULL;
    for (int i = 0; i < 40; i++) { /* one call site, past the cold captures */
        CHECK(cudaMalloc(&p, 4096), cudaSuccess);
        CHECK(cudaFree(p), cudaSuccess);
    }
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_thread, oom ? &t : NULL) != 0)
            return fprintf(stderr, "pthread_create failed\n"), 1;
        pthread_join(t, NULL);
        if (oom && i + 1 == n / 5)
            printf("rss_kib after %d threads: %ld\n", i + 1, rss_kib());
    }
    if (oom)
        printf("rss_kib after %d threads: %ld\n", n, rss_kib());
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int n = argc > 2 ? atoi(argv[2]) : 1000;
    if (strcmp(mode, "wrongfree") == 0)
        return wrongfree();
    if (strcmp(mode, "cancel") == 0)
        return cancel(3 * MiB, 8 * MiB);
    if (strcmp(mode, "threads") == 0)
        return threads(n, 0);
    if (strcmp(mode, "oom-threads") == 0)
        return threads(n, 1);
    fprintf(stderr, "usage: rt_concurrency wrongfree|cancel|threads N|oom-threads N\n");
    return 2;
}
