/* late_threads.c - the runtime arrives late and RTLD_LOCAL (as Python loads
 * torch), then 4 threads take cudaMalloc/cudaMallocHost from its handle and
 * make their first calls while the main thread loads and unloads an
 * unrelated library N times.  The wrappers' first calls resolve real
 * functions; if that called into the loader from inside dl_iterate_phdr
 * (whose lock a concurrent dlopen wants after taking its own), the process
 * would hang.  Usage: late_threads LIBRARY.so [N=200] */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "progs.h"

static void *rt;
static pthread_barrier_t start;

static void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    PFN(cudaMalloc) m;
    PFN(cudaMallocHost) mh;
    PFN(cudaFree) f;
    PFN(cudaFreeHost) fh;
    *(void **)&m = dlsym(rt, "cudaMalloc");
    *(void **)&mh = dlsym(rt, "cudaMallocHost");
    *(void **)&f = dlsym(rt, "cudaFree");
    *(void **)&fh = dlsym(rt, "cudaFreeHost");
    if (!m || !mh || !f || !fh) {
        fprintf(stderr, "dlsym on the runtime's handle failed\n");
        exit(2);
    }
    void *d = NULL, *h = NULL;
    CHECK(m(&d, 1 * MiB), cudaSuccess);
    CHECK(mh(&h, 4096), cudaSuccess);
    CHECK(f(d), cudaSuccess);
    CHECK(fh(h), cudaSuccess);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return fprintf(stderr, "usage: late_threads LIBRARY.so [N]\n"), 2;
    int n = argc > 2 ? atoi(argv[2]) : 200;
    rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (rt == NULL)
        return fprintf(stderr, "%s\n", dlerror()), 2;
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    pthread_barrier_init(&start, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    pthread_barrier_wait(&start);
    for (int i = 0; i < n; i++) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            return fprintf(stderr, "%s\n", dlerror()), 2;
        dlclose(h);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("ok\n");
    return 0;
}
