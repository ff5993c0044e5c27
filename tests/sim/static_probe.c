/* static_probe.c - a program linked only to the static simulated runtime
 * (libcudart_static.a: no libcuda at link time), run by
 * tests/e2e/test_sim_runtime.py.  Prints what a few runtime calls return. */
#include <stdio.h>

#include "cuda_api.h"

int main(void)
{
    int n = -1;
    void *p = NULL;
    size_t f = 0, t = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    printf("cudaGetDeviceCount %d %d\n", (int)e, n);
    e = cudaMalloc(&p, 3u << 20);
    printf("cudaMalloc %d %p\n", (int)e, p);
    e = cudaMemGetInfo(&f, &t);
    printf("cudaMemGetInfo %d %zu %zu\n", (int)e, f, t);
    e = cudaFree(p);
    printf("cudaFree %d\n", (int)e);
    return 0;
}
