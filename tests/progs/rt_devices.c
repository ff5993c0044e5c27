/* rt_devices.c - which device an allocation lands on, across every way a
 * thread's current device or context changes (the tracer caches it per
 * thread, src/preload/interpose/call_state.c).  Links the shared runtime; reaches
 * the driver through dlopen + dlsym, as frameworks do.
 *
 *   rt_devices switch   (SIMCUDA_DEVICES=3) allocations of 2^k MiB, each on
 *                       the device said beside it; live at exit:
 *                       GPU 0: 1+4+8+1024, GPU 1: 2+64+512, GPU 2: 16+32+128
 *   rt_devices repeat N N cudaMalloc+cudaFree and N cuMemAlloc_v2+cuMemFree_v2
 *                       pairs on one device
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "progs.h"

static struct {
    PFN(cuMemAlloc_v2) alloc;
    PFN(cuMemFree_v2) free;
    PFN(cuDeviceGet) device_get;
    PFN(cuDevicePrimaryCtxRetain) retain;
    PFN(cuCtxSetCurrent) set_current;
    PFN(cuCtxPushCurrent_v2) push;
    PFN(cuCtxPopCurrent_v2) pop;
    PFN(cuCtxCreate_v2) create;
    PFN(cuCtxDestroy_v2) destroy;
} drv;


static void load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "rt_devices: %s\n", dlerror());
        exit(1);
    }
    *(void **)&drv.alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&drv.free = dlsym(h, "cuMemFree_v2");
    *(void **)&drv.device_get = dlsym(h, "cuDeviceGet");
    *(void **)&drv.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&drv.set_current = dlsym(h, "cuCtxSetCurrent");
    *(void **)&drv.push = dlsym(h, "cuCtxPushCurrent_v2");
    *(void **)&drv.pop = dlsym(h, "cuCtxPopCurrent_v2");
    *(void **)&drv.create = dlsym(h, "cuCtxCreate_v2");
    *(void **)&drv.destroy = dlsym(h, "cuCtxDestroy_v2");
    if (!drv.alloc || !drv.free || !drv.device_get || !drv.retain ||
        !drv.set_current || !drv.push || !drv.pop || !drv.create || !drv.destroy) {
        fprintf(stderr, "rt_devices: a driver function is missing\n");
        exit(1);
    }
}

static void rt(size_t mib)
{
    void *p;
    CHECK(cudaMalloc(&p, mib * MiB), cudaSuccess);
}

static void dr(size_t mib)
{
    CUdeviceptr p;
    CHECK(drv.alloc(&p, mib * MiB), CUDA_SUCCESS);
}

static CUcontext primary(int ordinal)
{
    CUdevice d;
    CUcontext c;
    CHECK(drv.device_get(&d, ordinal), CUDA_SUCCESS);
    CHECK(drv.retain(&c, d), CUDA_SUCCESS);
    return c;
}

static void *other_thread(void *unused)
{
    (void)unused;
    rt(4); /* a new thread starts on device 0 */
    return NULL;
}

static int switches(void)
{
    pthread_t t;
    load_driver();
    rt(1);                                   /* GPU 0 */
    CHECK(cudaSetDevice(1), cudaSuccess);
    rt(2);                                   /* GPU 1 */
    CHECK(pthread_create(&t, NULL, other_thread, NULL), 0);
    CHECK(pthread_join(t, NULL), 0);         /* 4: GPU 0 */
    CHECK(cudaSetDevice(0), cudaSuccess);
    rt(8);                                   /* GPU 0 */
    CHECK(cudaSetDevice(2), cudaSuccess);
    rt(16);                                  /* GPU 2: its context is current now */
    dr(32);                                  /* GPU 2 */
    CHECK(drv.push(primary(1)), CUDA_SUCCESS);
    dr(64);                                  /* GPU 1 */
    CUcontext popped;
    CHECK(drv.pop(&popped), CUDA_SUCCESS);
    dr(128);                                 /* GPU 2 */
    CUcontext mine;
    CUdevice d0;
    CHECK(drv.device_get(&d0, 0), CUDA_SUCCESS);
    CHECK(drv.create(&mine, 0, d0), CUDA_SUCCESS);
    dr(256);                                 /* GPU 0, freed by the destroy */
    CHECK(drv.destroy(mine), CUDA_SUCCESS);
    CHECK(drv.set_current(primary(1)), CUDA_SUCCESS);
    dr(512);                                 /* GPU 1 */
    CHECK(drv.set_current(primary(0)), CUDA_SUCCESS);
    dr(1024);                                /* GPU 0 */
    return 0;
}

static int repeat(long n)
{
    load_driver();
    for (long i = 0; i < n; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 4096), cudaSuccess);
        CHECK(cudaFree(p), cudaSuccess);
    }
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        CHECK(drv.alloc(&p, 4096), CUDA_SUCCESS);
        CHECK(drv.free(p), CUDA_SUCCESS);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "switch") == 0)
        return switches();
    if (argc == 3 && strcmp(argv[1], "repeat") == 0)
        return repeat(atol(argv[2]));
    fprintf(stderr, "usage: rt_devices switch | repeat N\n");
    return 2;
}
