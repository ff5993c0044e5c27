/* rt_pace.c - a host whose snapshots are expensive (LIVE allocations kept)
 * and that asks for many, for tests/e2e/test_pacing.py.
 *
 *   rt_pace LIVE SECONDS [storm]
 *
 * Keeps LIVE allocations of 4 KiB, then for SECONDS allocates and frees
 * 1 MiB in a loop; with `storm` it raises SIGUSR1 (CUMEMTRACE_SIGNAL) every
 * millisecond meanwhile.  Prints "iterations wall_s process_cpu_s
 * main_cpu_s": what the process's other threads (the library's) used is
 * the difference of the last two. */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "progs.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_s(int who)
{
    struct rusage r;
    getrusage(who, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    long live = atol(argv[1]);
    double seconds = atof(argv[2]);
    int storm = argc > 3 && strcmp(argv[3], "storm") == 0;
    if (getenv("CUMEMTRACE_SIGNAL") == NULL)
        signal(SIGUSR1, SIG_IGN);
    void **keep = calloc((size_t)live + 1, sizeof *keep);
    for (long i = 0; i < live; i++)
        CHECK(cudaMalloc(&keep[i], 4096), cudaSuccess);
    double t0 = now_s(), next_signal = t0;
    long n = 0;
    while (now_s() - t0 < seconds) {
        void *p;
        CHECK(cudaMalloc(&p, MiB), cudaSuccess);
        CHECK(cudaFree(p), cudaSuccess);
        n++;
        if (storm && now_s() >= next_signal) {
            raise(SIGUSR1);
            next_signal += 0.001;
        }
    }
    printf("%ld %.3f %.3f %.3f\n", n, now_s() - t0, cpu_s(RUSAGE_SELF), cpu_s(RUSAGE_THREAD));
    return 0;
}
