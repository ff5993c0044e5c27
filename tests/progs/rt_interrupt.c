/* rt_interrupt.c - a host that interrupts the thread writing a snapshot,
 * for tests/e2e/test_interrupt.py.
 *
 *   rt_interrupt MODE LIVE
 *
 * First LIVE allocations of 4 KiB are made and kept (the dump's cost grows
 * with them).  MODE:
 *   exit-in-handler  a thread runs out of memory; the moment the post-mortem's
 *                    temporary file appears in the current directory the main
 *                    thread sends it SIGUSR1, whose handler calls
 *                    pthread_exit(); then the main thread allocates and frees
 *                    (the tracker's lock must be free) and prints "ok"
 *   cancel           the same thread, cancelled (deferred) instead; then the
 *                    main thread runs out of memory itself and prints "ok"
 *   exit             prints "exiting" and returns from main (the test sends
 *                    SIGTERM while the exit snapshot is written)
 *   oom              prints "oom", runs out of memory, prints "ready" and
 *                    sleeps 20 s (the test sends SIGTERM during the post-mortem)
 *   dump-loop        a thread calls cumemtrace_dump(NULL) back to back; after
 *                    its first dump the main thread prints "ready" and sleeps
 *                    20 s (the test sends SIGTERM between and during dumps)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

static void leave_thread(int sig)
{
    (void)sig;
    pthread_exit(NULL); /* not async-signal-safe: what the host does anyway */
}

static void *run_out(void *arg)
{
    (void)arg;
    void *p;
    CHECK(cudaMalloc(&p, 1ull << 50), cudaErrorMemoryAllocation);
    return NULL;
}

static int dumps_done;

static void *dump_loop(void *arg)
{
    int (*dump)(const char *) = (int (*)(const char *))arg;
    for (;;) {
        dump(NULL);
        __atomic_add_fetch(&dumps_done, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Waits (at most 20 s) until a temporary snapshot file exists here. */
static int temporary_appears(void)
{
    struct timespec tick = {0, 100000};
    for (int i = 0; i < 200000; i++) {
        DIR *d = opendir(".");
        struct dirent *e;
        int found = 0;
        while (d != NULL && (e = readdir(d)) != NULL)
            found |= strncmp(e->d_name, ".cumemtrace-tmp.", 16) == 0;
        if (d != NULL)
            closedir(d);
        if (found)
            return 1;
        nanosleep(&tick, NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: rt_interrupt MODE LIVE\n");
        return 2;
    }
    const char *mode = argv[1];
    long live = atol(argv[2]);
    void **keep = calloc((size_t)live + 1, sizeof *keep);
    for (long i = 0; i < live; i++)
        CHECK(cudaMalloc(&keep[i], 4096), cudaSuccess);
    if (strcmp(mode, "exit") == 0) {
        printf("exiting\n");
        fflush(stdout);
        return 0;
    }
    if (strcmp(mode, "oom") == 0) {
        printf("oom\n");
        fflush(stdout);
        run_out(NULL);
        printf("ready\n");
        fflush(stdout);
        sleep(20);
        return 0;
    }
    if (strcmp(mode, "dump-loop") == 0) {
        void *dump = dlsym(RTLD_DEFAULT, "cumemtrace_dump");
        pthread_t t;
        if (dump == NULL || pthread_create(&t, NULL, dump_loop, dump) != 0)
            return 1;
        struct timespec tick = {0, 1000000};
        while (__atomic_load_n(&dumps_done, __ATOMIC_ACQUIRE) == 0)
            nanosleep(&tick, NULL);
        printf("ready\n");
        fflush(stdout);
        sleep(20);
        return 0;
    }
    int cancel = strcmp(mode, "cancel") == 0;
    if (!cancel && strcmp(mode, "exit-in-handler") != 0) {
        fprintf(stderr, "rt_interrupt: unknown mode '%s'\n", mode);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = leave_thread;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, run_out, NULL);
    if (!temporary_appears()) {
        fprintf(stderr, "rt_interrupt: no temporary file appeared\n");
        return 1;
    }
    if (cancel)
        pthread_cancel(t);
    else
        pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
    void *p;
    if (cancel) {
        CHECK(cudaMalloc(&p, 1ull << 50), cudaErrorMemoryAllocation);
    } else {
        CHECK(cudaMalloc(&p, MiB), cudaSuccess);
        CHECK(cudaFree(p), cudaSuccess);
    }
    printf("ok\n");
    return 0;
}
