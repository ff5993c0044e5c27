/* rt_concurrency.c - the hostile cases for the preloaded
 * library's own state: frees with the wrong API, a thread cancelled inside
 * an allocation, allocations from a signal handler, many short threads.
 * Usage: rt_concurrency MODE [ARGS]; prints what the application saw, so a
 * run with the preload can be compared with one without. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* Signal handlers that allocate (not async-signal-safe, but real programs
 * do it).  signal: 1 MiB, kept for main to free.  signal-stress: a 0-byte
 * cudaMalloc, which the simulated runtime answers without taking a lock
 * (so wherever the signal lands the simulator cannot deadlock; only the
 * tracer could), while the cudaMalloc it interrupts is the same. */
#define HANDLER_BYTES (1 * MiB)
static void *handler_ptrs[1024];
static atomic_int handled, stress_mode, worker_done, worker_tid;

static void on_usr1(int sig)
{
    (void)sig;
    int saved = errno;
    void *p = NULL;
    int stress = atomic_load(&stress_mode);
    if (cudaMalloc(&p, stress ? 0 : HANDLER_BYTES) == cudaSuccess) {
        int i = atomic_fetch_add(&handled, 1);
        if (!stress && i < 1024)
            handler_ptrs[i] = p;
    }
    errno = saved;
}

static void *waiting_worker(void *arg)
{
    (void)arg;
    atomic_store(&worker_tid, (int)syscall(SYS_gettid));
    void *p = NULL;
    CHECK(cudaMalloc(&p, 3 * MiB), cudaSuccess); /* waits (SIMCUDA_WAIT_BYTES) */
    CHECK(cudaFree(p), cudaSuccess);
    atomic_store(&worker_done, 1);
    return NULL;
}

static void *churn_worker(void *arg)
{
    for (long i = 0; i < (long)arg; i++) {
        void *p = NULL;
        CHECK(cudaMalloc(&p, 0), cudaSuccess);
    }
    atomic_store(&worker_done, 1);
    return NULL;
}

/* 'S': the thread sleeps - inside cudaMalloc, that is in the driver's pause() */
static int sleeping(int tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    return close != NULL && close[1] == ' ' && close[2] == 'S';
}

/* signal: a handler allocates while its thread is inside the real
 * cudaMalloc.  signal-stress: a handler allocates while its thread makes
 * N allocations, wherever the signal lands. */
static int signals(int stress, long loops)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    CHECK(cudaFree(0), cudaSuccess);
    atomic_store(&stress_mode, stress);
    pthread_t t;
    pthread_create(&t, NULL, stress ? churn_worker : waiting_worker, (void *)loops);
    struct timespec pause_ns = {0, stress ? 20000 : 5000000};
    while (!atomic_load(&worker_done)) {
        if (stress || (atomic_load(&worker_tid) != 0 && sleeping(atomic_load(&worker_tid))))
            pthread_kill(t, SIGUSR1);
        nanosleep(&pause_ns, NULL);
    }
    pthread_join(t, NULL);
    int n = atomic_load(&handled);
    for (int i = 0; !stress && i < n && i < 1024; i++)
        CHECK(cudaFree(handler_ptrs[i]), cudaSuccess);
    printf("loop %ld handler %d\n", stress ? loops : 1, n);
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

/* This process's resident anonymous memory (heap, stacks, anonymous
 * mappings), in KiB (-1 if it cannot be read).  Not VmRSS: that adds the
 * file pages mapped from the binary and its libraries, which come and go
 * with the machine's memory pressure (reclaimed, faulted back) and with the
 * code paths run for the first time - nothing this process leaks. */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "RssAnon: %ld", &kib) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kib;
}

/* N threads one after the other (each joined before the next starts);
 * oom: prints the resident anonymous memory after the first fifth, after
 * three fifths and at the end. */
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
        if (oom && (i + 1 == n / 5 || i + 1 == 3 * n / 5))
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
    if (strcmp(mode, "signal") == 0)
        return signals(0, 1);
    if (strcmp(mode, "signal-stress") == 0)
        return signals(1, n);
    if (strcmp(mode, "cancel") == 0)
        return cancel(3 * MiB, 8 * MiB);
    if (strcmp(mode, "threads") == 0)
        return threads(n, 0);
    if (strcmp(mode, "oom-threads") == 0)
        return threads(n, 1);
    fprintf(stderr, "usage: rt_concurrency wrongfree|cancel|signal|signal-stress N|threads N|oom-threads N\n");
    return 2;
}
