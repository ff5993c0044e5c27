/* dl_driver.c - reaches the driver like old PyTorch, old NCCL and CUDA
 * runtimes <= 11.2: dlopen("libcuda.so.1") + dlsym(handle, "cuMemAlloc_v2"),
 * and like newer ones: dlsym(handle, "cuGetProcAddress_v2") then look-ups.
 * Links neither libcuda nor libcudart. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progs.h"


#define GET(h, sym) ((PFN(sym))need(dlsym(h, #sym), #sym))

static void *need(void *p, const char *name)
{
    if (p == NULL) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

int main(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
    CUdevice dev;
    CUcontext ctx;
    CHECK(GET(h, cuInit)(0), CUDA_SUCCESS);
    CHECK(GET(h, cuDeviceGet)(&dev, 0), CUDA_SUCCESS);
    CHECK(GET(h, cuDevicePrimaryCtxRetain)(&ctx, dev), CUDA_SUCCESS);
    CHECK(GET(h, cuCtxSetCurrent)(ctx), CUDA_SUCCESS);

    /* path 2: dlsym on the handle */
    CUdeviceptr a, b;
    CHECK(GET(h, cuMemAlloc_v2)(&a, 7 * MiB), CUDA_SUCCESS);

    /* path 3: cuGetProcAddress obtained with dlsym */
    PFN(cuGetProcAddress_v2) gpa = GET(h, cuGetProcAddress_v2);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CHECK(gpa("cuMemAlloc", &fn, 3020, CU_GET_PROC_ADDRESS_DEFAULT, &st), CUDA_SUCCESS);
    CHECK(st, CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(((PFN(cuMemAlloc_v2))fn)(&b, 9 * MiB), CUDA_SUCCESS);
    /* asking for cuGetProcAddress itself keeps later look-ups hooked */
    void *gpa_again = NULL;
    CHECK(gpa("cuGetProcAddress", &gpa_again, 12000, 0, &st), CUDA_SUCCESS);
    CHECK(((PFN(cuGetProcAddress_v2))gpa_again)("cuMemFree", &fn, 3020, 0, &st), CUDA_SUCCESS);
    CHECK(((PFN(cuMemFree_v2))fn)(a), CUDA_SUCCESS);
    /* version 0 of an unknown or empty name: the driver's answer, untouched */
    CHECK(gpa("", &fn, 0, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

    /* names that are not ours pass through untouched */
    if (dlsym(h, "cudnnCreate") != NULL)
        return fprintf(stderr, "cudnnCreate resolved?\n"), 1;
    if (dlerror() == NULL)
        return fprintf(stderr, "dlerror lost\n"), 1;
    void *direct = dlsym(h, "cuMemGetAllocationGranularity"); /* not wrapped */
    if (direct == NULL)
        return fprintf(stderr, "cuMemGetAllocationGranularity missing\n"), 1;
    Dl_info info;
    if (dladdr(direct, &info) == 0 || strstr(info.dli_fname, "libcuda") == NULL)
        return fprintf(stderr, "unwrapped symbol did not come from libcuda: %s\n",
                       info.dli_fname), 1;
    (void)b; /* live at exit: 9 MiB */
    printf("ok\n");
    return 0;
}
