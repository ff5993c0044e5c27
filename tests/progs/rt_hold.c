/* rt_hold.c - a job that holds device memory until it is stopped, for the
 * termination tests (tests/e2e/test_ending.py).
 *
 *   rt_hold MODE [LOG]
 *
 * MODE says what the host does about SIGTERM (and SIGINT, SIGHUP):
 *   default  nothing: the default action ends it
 *   early    a handler installed before the first CUDA call that makes the
 *            main loop return 3 (a framework's graceful stop)
 *   late     the same handler installed after the first CUDA call
 *   reraise  a handler that restores SIG_DFL and re-raises
 *   ignore   SIGTERM ignored (a rank that does not stop)
 * It holds 64 MiB, prints "ready" and then, every millisecond, allocates or
 * frees one of 16 blocks of 1 MiB.  With LOG, each operation is appended
 * to that file, after it happened, as "<CLOCK_REALTIME ns> <live bytes>"
 * (the program's own truth for the stream test).  RT_HOLD_OOM=1 asks for
 * more than the card has and exits 1; RT_HOLD_BUSY=1 does not sleep between
 * operations (a signal then mostly lands inside a CUDA call), RT_HOLD_BURST=n
 * sleeps 1 ms after every n; RT_HOLD_FIRST_CALL=1 makes, after "ready", the
 * process's first cudaFreeHost call (NULL: nothing is freed), whose real
 * function our wrapper looks up then; after 60 s it exits 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

static volatile sig_atomic_t stop;

static void graceful(int sig)
{
    (void)sig;
    stop = 1;
}

static void reraise(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig);
}

static void handle(void (*h)(int))
{
    int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = h;
        sigaction(sigs[i], &sa, NULL);
    }
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t); /* comparable with start_wall_ns */
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "default";
    FILE *log = argc > 2 ? fopen(argv[2], "w") : NULL;
    if (strcmp(mode, "early") == 0)
        handle(graceful);
    else if (strcmp(mode, "ignore") == 0)
        signal(SIGTERM, SIG_IGN);
    void *base;
    CHECK(cudaMalloc(&base, 64 * MiB), cudaSuccess);
    unsigned long long live = 64 * MiB;
    if (strcmp(mode, "late") == 0)
        handle(graceful);
    else if (strcmp(mode, "reraise") == 0)
        handle(reraise);
    if (getenv("RT_HOLD_OOM") != NULL) {
        void *huge;
        if (cudaMalloc(&huge, 1ull << 50) != cudaSuccess) {
            fprintf(stderr, "rt_hold: out of memory\n");
            return 1;
        }
    }
    if (log != NULL) {
        fprintf(log, "%lld %llu\n", now_ns(), live);
        fflush(log);
    }
    printf("ready\n");
    fflush(stdout);
    if (getenv("RT_HOLD_FIRST_CALL") != NULL)
        CHECK(cudaFreeHost(NULL), cudaSuccess);
    void *blocks[16] = {0};
    unsigned seed = (unsigned)getpid();
    long long end = now_ns() + 60000000000LL;
    int busy = getenv("RT_HOLD_BUSY") != NULL;
    long burst = getenv("RT_HOLD_BURST") ? atol(getenv("RT_HOLD_BURST")) : 1;
    long n = 0;
    while (!stop && now_ns() < end) {
        seed = seed * 1103515245u + 12345u;
        unsigned i = (seed >> 16) % 16;
        if (blocks[i] == NULL) {
            CHECK(cudaMalloc(&blocks[i], MiB), cudaSuccess);
            live += MiB;
        } else {
            CHECK(cudaFree(blocks[i]), cudaSuccess);
            blocks[i] = NULL;
            live -= MiB;
        }
        if (log != NULL) {
            fprintf(log, "%lld %llu\n", now_ns(), live);
            fflush(log);
        }
        struct timespec ms = {0, 1000000};
        if (!busy && ++n % (burst > 0 ? burst : 1) == 0)
            nanosleep(&ms, NULL);
    }
    return stop ? 3 : 0;
}
