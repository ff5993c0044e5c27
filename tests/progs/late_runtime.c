/* late_runtime.c - calls our exported cudaMalloc before any CUDA runtime is
 * loaded (the wrapper must answer as the API does without a driver, and
 * keep answering cheaply), then loads the runtime RTLD_LOCAL, as Python
 * loads extension modules: the wrapper must now find the real function. */
#include <dlfcn.h>
#include <stdio.h>

#include "progs.h"

int main(void)
{
    PFN(cudaMalloc) ours;
    *(void **)&ours = dlsym(RTLD_DEFAULT, "cudaMalloc");
    if (ours == NULL)
        return fprintf(stderr, "run under LD_PRELOAD\n"), 2;
    void *p = NULL;
    for (int i = 0; i < 3; i++)
        CHECK(ours(&p, 1 * MiB), cudaErrorInsufficientDriver);
    if (dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL) == NULL)
        return fprintf(stderr, "%s\n", dlerror()), 2;
    CHECK(ours(&p, 3 * MiB), cudaSuccess);
    printf("ok\n");
    return 0;
}
