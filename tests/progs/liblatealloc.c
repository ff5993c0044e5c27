/* liblatealloc.c - loaded by a Python host (ctypes): late_alloc_at_exit()
 * registers a C atexit handler that allocates device memory after the
 * interpreter has ended, the case where the exit snapshot written at
 * Python's end is rewritten by the C exit (tests/e2e/test_outputs.py). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static size_t late_bytes;

static void late_alloc(void)
{
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    int (*malloc_)(void **, size_t);
    *(void **)&malloc_ = rt != NULL ? dlsym(rt, "cudaMalloc") : NULL;
    void *p = NULL;
    if (malloc_ == NULL || malloc_(&p, late_bytes) != 0)
        fprintf(stderr, "liblatealloc: the late cudaMalloc failed\n");
}

int late_alloc_at_exit(size_t bytes);
int late_alloc_at_exit(size_t bytes)
{
    late_bytes = bytes;
    return atexit(late_alloc);
}
