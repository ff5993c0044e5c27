/* bench_nvtx.c - what the program's NVTX ranges cost under cumemtrace
 * (scripts/bench_phases.py runs each mode bare - NVTX without a tool, its
 * calls no-ops - and traced, with NVTX_INJECTION64_PATH naming the
 * library, interleaved, and compares).  Built against NVIDIA's header-only
 * NVTX 3 (tests/nvtx.mk).
 *
 *   bench_nvtx ranges ITERS        push+pop pairs (nvtxRangePushA/Pop) one
 *                                  level under an open range: ns per pair
 *   bench_nvtx alloc ITERS inside  cudaMalloc/cudaFree pairs with a range
 *   bench_nvtx alloc ITERS outside open, or with none: ns per pair
 * Each loop is one noinline function (ranges_loop, alloc_loop) that callgrind
 * --toggle-collect counts alone.  Output: one line of key=value pairs. */
#include <nvtx3/nvToolsExt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_api.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: on a loaded machine the wall clock also counts
 * the time the loop was not running. */
static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void ranges_loop(long iters)
{
    for (long i = 0; i < iters; i++) {
        nvtxRangePushA("step");
        nvtxRangePop();
    }
}

__attribute__((noinline)) static void alloc_loop(long iters)
{
    for (long i = 0; i < iters; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) {
            fprintf(stderr, "bench_nvtx: cudaMalloc/cudaFree failed\n");
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_nvtx ranges|alloc ITERS [inside|outside]\n");
        return 2;
    }
    long iters = atol(argv[2]);
    nvtxRangePushA("warm-up"); /* NVTX loads its tool at the first call */
    nvtxRangePop();
    if (strcmp(argv[1], "ranges") == 0) {
        nvtxRangePushA("epoch");
        double t0 = now(), c0 = cpu();
        ranges_loop(iters);
        double t1 = now(), c1 = cpu();
        nvtxRangePop();
        printf("pairs=%ld ns_per_pair=%.2f cpu_ns_per_pair=%.2f\n", iters,
               (t1 - t0) * 1e9 / (double)iters, (c1 - c0) * 1e9 / (double)iters);
        return 0;
    }
    if (strcmp(argv[1], "alloc") == 0 && argc > 3) {
        bool inside = strcmp(argv[3], "inside") == 0;
        void *p;
        cudaMalloc(&p, 1 << 20); /* the runtime's start-up, outside the loop */
        cudaFree(p);
        if (inside) {
            nvtxRangePushA("validation");
            nvtxRangePushA("step 1200");
        }
        alloc_loop(iters / 10); /* warm: the call site and its phase's site exist */
        double t0 = now(), c0 = cpu();
        alloc_loop(iters);
        double t1 = now(), c1 = cpu();
        if (inside) {
            nvtxRangePop();
            nvtxRangePop();
        }
        printf("pairs=%ld ns_per_pair=%.2f cpu_ns_per_pair=%.2f\n", iters,
               (t1 - t0) * 1e9 / (double)iters, (c1 - c0) * 1e9 / (double)iters);
        return 0;
    }
    fprintf(stderr, "bench_nvtx: unknown mode '%s'\n", argv[1]);
    return 2;
}
