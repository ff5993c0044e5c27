/* test_sim_context.c - the simulated device's devices, configuration and
 * primary contexts: SIMCUDA_DEVICES / _MEMORY / _MEMORY_<n> and their
 * warnings, device queries, retain/release/reset accounting, the per-thread
 * current context, many threads at once, and use after fork(). */
#include <pthread.h>

#include "sim_test.h"

static void devices_body(void)
{
    int n = 0, v = 0;
    CUdevice dev = -1;
    char name[64];
    size_t total = 0;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDeviceGetCount(&n), CUDA_SUCCESS);
    SIM_CHECK_EQ(n, 1);
    SIM_CHECK_CU(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(dev, 0);
    SIM_CHECK_CU(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    SIM_CHECK_CU(cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
    SIM_CHECK_CU(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
    SIM_CHECK(strcmp(name, "cumemtrace simulated GPU") == 0);
    SIM_CHECK_CU(cuDeviceGetName(name, 5, 0), CUDA_SUCCESS);
    SIM_CHECK(strcmp(name, "cume") == 0);
    SIM_CHECK_CU(cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDeviceGetName(name, 5, 1), CUDA_ERROR_INVALID_DEVICE);
    SIM_CHECK_CU(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(total, 16 * GiB); /* the default */
    SIM_CHECK_CU(cuDeviceTotalMem_v2(&total, 3), CUDA_ERROR_INVALID_DEVICE);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                      0), CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 1);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 1);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 9);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, (CUdevice_attribute)9999, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0),
                 CUDA_ERROR_INVALID_VALUE);
}
SIM_TEST(devices_default, devices_body, NULL)

static void multi_body(void)
{
    int n = 0;
    size_t total = 0, f = 0;
    CUdeviceptr p0 = 0, p1 = 0, p2 = 0;
    CUdevice dev = -1;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDeviceGetCount(&n), CUDA_SUCCESS);
    SIM_CHECK_EQ(n, 3);
    SIM_CHECK_CU(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(total, 32 * MiB);
    SIM_CHECK_CU(cuDeviceTotalMem_v2(&total, 1), CUDA_SUCCESS);
    SIM_CHECK_EQ(total, 64 * MiB); /* SIMCUDA_MEMORY_1 */
    SIM_CHECK_CU(cuDeviceTotalMem_v2(&total, 2), CUDA_SUCCESS);
    SIM_CHECK_EQ(total, 32 * MiB);

    CUcontext c0 = sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&p0, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(p0, SIM_TEST_BASE(0));
    CUcontext c1 = sim_test_ctx(1);
    SIM_CHECK(c1 != c0);
    SIM_CHECK_CU(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    SIM_CHECK_EQ(dev, 1);
    SIM_CHECK_CU(cuMemAlloc_v2(&p1, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(p1, SIM_TEST_BASE(1));
    SIM_CHECK_EQ(sim_test_free(), 60 * MiB);
    sim_test_ctx(2);
    SIM_CHECK_CU(cuMemAlloc_v2(&p2, 1), CUDA_SUCCESS);
    SIM_CHECK_EQ(p2, SIM_TEST_BASE(2));
    SIM_CHECK_CU(cuMemFree_v2(p0), CUDA_SUCCESS); /* any context frees any pointer (UVA) */
    SIM_CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemGetInfo_v2(&f, &total), CUDA_SUCCESS);
    SIM_CHECK_EQ(f, 32 * MiB);
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(&c0, 3), CUDA_ERROR_INVALID_DEVICE);
}
SIM_TEST(multiple_devices, multi_body, "SIMCUDA_DEVICES=3", "SIMCUDA_MEMORY=32MiB",
         "SIMCUDA_MEMORY_1=64MiB")

static void defaults_body(void)
{
    int n = 0;
    size_t total = 0;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDeviceGetCount(&n), CUDA_SUCCESS);
    SIM_CHECK_EQ(n, 1);
    SIM_CHECK_CU(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(total, 16 * GiB);
    sim_test_ctx(0);
    SIM_CHECK_EQ(sim_test_free(), 16 * GiB); /* the malformed reserve was ignored */
}

static void env_malformed(void **state)
{
    static const char *const env[] = {"SIMCUDA_MEMORY=abc", "SIMCUDA_DEVICES=x",
                                      "SIMCUDA_RESERVED=-1", NULL};
    char err[4096];
    (void)state;
    sim_test_run_capture(env, defaults_body, err, sizeof err);
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_MEMORY='abc': expected a size "
                                "like 24GiB\n"));
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_DEVICES='x': expected a number "
                                "from 0 to 16\n"));
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_RESERVED='-1'"));
}

/* SIMCUDA_NAME / _CC / _SMS: what scripts/simgpu --gpu l4 sets. */
static void identity_body(void)
{
    char name[64];
    int v = -1;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
    SIM_CHECK(strcmp(name, "NVIDIA L4") == 0);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 8);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 9);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 58);
}
SIM_TEST(identity, identity_body, "SIMCUDA_NAME=NVIDIA L4", "SIMCUDA_CC=8.9", "SIMCUDA_SMS=58")

/* A malformed identity keeps the H100-like defaults. */
static void identity_default_body(void)
{
    int v = -1;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 9);
    SIM_CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(v, 132);
}

static void identity_malformed(void **state)
{
    static const char *const env[] = {"SIMCUDA_CC=8", "SIMCUDA_SMS=0", NULL};
    char err[4096];
    (void)state;
    sim_test_run_capture(env, identity_default_body, err, sizeof err);
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_CC='8': expected a compute "
                                "capability like 8.9\n"));
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_SMS='0'"));
}

static void env_out_of_range(void **state)
{
    static const char *const env[] = {"SIMCUDA_MEMORY=1KiB", "SIMCUDA_DEVICES=17",
                                      "SIMCUDA_MEMORY_0=1TiB", NULL};
    char err[4096];
    (void)state;
    sim_test_run_capture(env, defaults_body, err, sizeof err);
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_MEMORY='1KiB': expected a size "
                                "from 2.00 MiB to 512 GiB\n"));
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_DEVICES='17'"));
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_MEMORY_0='1TiB'"));
}

static void no_device_body(void)
{
    int n = -1;
    SIM_CHECK_CU(cuInit(0), CUDA_ERROR_NO_DEVICE);
    SIM_CHECK_CU(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}
SIM_TEST(no_devices, no_device_body, "SIMCUDA_DEVICES=0")

/* Retain counts; the last release destroys the context and its memory. */
static void refcount_body(void)
{
    CUcontext c = NULL, c2 = NULL, cur = NULL;
    unsigned int flags = 99;
    int active = -1;
    CUdeviceptr p = 0;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    SIM_CHECK_EQ(active, 0);
    SIM_CHECK_EQ(flags, 0);
    SIM_CHECK_CU(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(&c2, 0), CUDA_SUCCESS);
    SIM_CHECK(c == c2 && c != NULL);
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    SIM_CHECK(cur == NULL); /* retaining does not make current */
    SIM_CHECK_CU(cuCtxSetCurrent(c), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    SIM_CHECK_EQ(active, 1);
    SIM_CHECK_EQ(sim_test_free(), 28 * MiB);
    SIM_CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS); /* v1: same behaviour */
    SIM_CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    SIM_CHECK_EQ(active, 0);
    SIM_CHECK_CU(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    /* Still current on this thread, but destroyed. */
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxSetCurrent(c), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxSetCurrent((CUcontext)&flags), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB); /* its memory went with it */
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);

    SIM_CHECK_CU(cuDevicePrimaryCtxSetFlags_v2(0, 4), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    SIM_CHECK_EQ(flags, 4);
    SIM_CHECK_CU(cuDevicePrimaryCtxSetFlags(0, 1), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    SIM_CHECK_EQ(flags, 1);
    SIM_CHECK_CU(cuDevicePrimaryCtxSetFlags_v2(0, 3), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDevicePrimaryCtxSetFlags_v2(0, 0x100), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDevicePrimaryCtxSetFlags_v2(1, 0), CUDA_ERROR_INVALID_DEVICE);
    SIM_CHECK_CU(cuDevicePrimaryCtxGetState(0, NULL, &active), CUDA_ERROR_INVALID_VALUE);
}
SIM_TEST(primary_ctx_refcount, refcount_body, "SIMCUDA_MEMORY=32MiB")

/* Reset frees what the context owns (linear, managed, pinned host); pool
 * memory is not a context's (cuCtxDestroy's documentation) and stays; the
 * retain count stays. */
static void reset_body(void)
{
    CUdeviceptr lin = 0, man = 0, as = 0, keep = 0;
    void *host = NULL;
    int active = 0;
    unsigned int flags;
    sim_test_ctx(0);
    sim_test_ctx(1);
    SIM_CHECK_CU(cuMemAlloc_v2(&keep, 2 * MiB), CUDA_SUCCESS); /* on device 1 */
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&lin, 3 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocManaged(&man, 1000, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocAsync(&as, 100, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemHostAlloc(&host, 100, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB - 8 * MiB);
    SIM_CHECK_CU(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB - 2 * MiB); /* the pool's page */
    SIM_CHECK_CU(cuMemFree_v2(lin), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree_v2(man), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeHost(host), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeAsync(as, NULL), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB);
    SIM_CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    SIM_CHECK_EQ(active, 1);
    SIM_CHECK_CU(cuMemAlloc_v2(&lin, 3 * MiB), CUDA_SUCCESS); /* still usable */
    SIM_CHECK_CU(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);     /* v1 too */
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB);
    SIM_CHECK_CU(cuMemFree_v2(keep), CUDA_SUCCESS); /* device 1 untouched */
    SIM_CHECK_CU(cuDevicePrimaryCtxReset_v2(2), CUDA_ERROR_INVALID_DEVICE);
}
SIM_TEST(primary_ctx_reset, reset_body, "SIMCUDA_MEMORY=32MiB", "SIMCUDA_DEVICES=2")

/* cuCtxDestroy frees what that context owns and nothing of the primary
 * context's; pool memory stays; a destroyed context is no longer usable. */
static void created_body(void)
{
    CUcontext c, c4, cur;
    CUdeviceptr prim = 0, lin = 0, as = 0;
    void *host = NULL;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&prim, 2 * MiB), CUDA_SUCCESS); /* the primary's */
    SIM_CHECK_CU(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    SIM_CHECK(cur == c); /* made current */
    SIM_CHECK_CU(cuMemAlloc_v2(&lin, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocAsync(&as, 100, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocHost_v2(&host, 100), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB - 8 * MiB);
    SIM_CHECK_CU(cuCtxDestroy_v2(c), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    SIM_CHECK(cur == NULL);
    SIM_CHECK_CU(cuMemAlloc_v2(&lin, 1), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxSetCurrent(c), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxDestroy_v2(c), CUDA_ERROR_INVALID_CONTEXT);
    sim_test_ctx(0);
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB - 4 * MiB); /* primary's + the pool's */
    SIM_CHECK_CU(cuMemFreeHost(host), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree_v2(lin), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeAsync(as, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(prim), CUDA_SUCCESS);
    CUcontext primary;
    SIM_CHECK_CU(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxDestroy_v2(primary), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxDestroy_v2(NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuCtxCreate_v3(&c, NULL, 0, 0, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxCreate_v3(&c4, (struct CUexecAffinityParam_st *)&c, 1, 0, 0),
                 CUDA_ERROR_NOT_SUPPORTED);
    SIM_CHECK_CU(cuCtxCreate_v4(&c4, NULL, 0, 0), CUDA_SUCCESS);
    SIM_CHECK(c4 != c);
    SIM_CHECK_CU(cuCtxCreate_v4(&c4, (struct CUctxCreateParams_st *)&c, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    SIM_CHECK_CU(cuCtxCreate_v2(&c4, 3, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuCtxCreate_v2(&c4, 0, 5), CUDA_ERROR_INVALID_DEVICE);
    SIM_CHECK_CU(cuCtxCreate_v2(NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
}
SIM_TEST(created_contexts, created_body, "SIMCUDA_MEMORY=32MiB")

static void *other_thread(void *arg)
{
    CUcontext cur = NULL;
    (void)arg;
    CUdeviceptr p = 0;
    CUdevice dev = -1;
    SIM_CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    SIM_CHECK(cur == NULL);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    sim_test_ctx(1);
    SIM_CHECK_CU(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    SIM_CHECK_EQ(dev, 1);
    return NULL;
}

static void per_thread_body(void)
{
    CUcontext c0 = sim_test_ctx(0), cur = NULL;
    CUdevice dev = -1;
    pthread_t t;
    SIM_CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
    SIM_CHECK_EQ(pthread_join(t, NULL), 0);
    SIM_CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    SIM_CHECK(cur == c0);
    SIM_CHECK_CU(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    SIM_CHECK_EQ(dev, 0);
    SIM_CHECK_CU(cuCtxGetDevice_v2(&dev, NULL), CUDA_SUCCESS);
    SIM_CHECK_EQ(dev, 0);
    CUcontext c1 = NULL;
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxGetDevice_v2(&dev, c1), CUDA_SUCCESS);
    SIM_CHECK_EQ(dev, 1);
    SIM_CHECK_CU(cuCtxGetDevice_v2(&dev, (CUcontext)&dev), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxGetDevice_v2(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxSynchronize_v2(c1), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxSynchronize_v2((CUcontext)&dev), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuCtxGetCurrent(NULL), CUDA_ERROR_INVALID_VALUE);
}
SIM_TEST(current_context_per_thread, per_thread_body, "SIMCUDA_DEVICES=2")

/* Eight threads allocating and freeing at once: no two live allocations
 * overlap, and everything comes back. */
enum { THREADS = 8, PER_THREAD = 64, ROUNDS = 20 };
static CUdeviceptr live[THREADS][PER_THREAD];
static size_t live_size[THREADS][PER_THREAD];

static void *hammer(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned int seed = (unsigned int)id * 7919u + 1;
    sim_test_ctx(0);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PER_THREAD; i++) {
            seed = seed * 1103515245u + 12345u;
            size_t size = (seed >> 8) % 3 == 0 ? (size_t)((seed >> 12) % 5 + 1) * MiB
                                                : (size_t)((seed >> 12) % 4000 + 1) * 100;
            SIM_CHECK_CU(cuMemAlloc_v2(&live[id][i], size), CUDA_SUCCESS);
            live_size[id][i] = size;
        }
        for (int i = 0; i < PER_THREAD; i++)
            SIM_CHECK_CU(cuMemFree_v2(live[id][i]), CUDA_SUCCESS);
    }
    /* Leave one round live for the overlap check. */
    for (int i = 0; i < PER_THREAD; i++) {
        live_size[id][i] = (size_t)(i % 9 + 1) * 300000;
        SIM_CHECK_CU(cuMemAlloc_v2(&live[id][i], live_size[id][i]), CUDA_SUCCESS);
    }
    return NULL;
}

static void threads_body(void)
{
    pthread_t t[THREADS];
    sim_test_ctx(0);
    for (int i = 0; i < THREADS; i++)
        SIM_CHECK_EQ(pthread_create(&t[i], NULL, hammer, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++)
        SIM_CHECK_EQ(pthread_join(t[i], NULL), 0);
    for (int a = 0; a < THREADS * PER_THREAD; a++) {
        CUdeviceptr pa = live[a / PER_THREAD][a % PER_THREAD];
        size_t sa = live_size[a / PER_THREAD][a % PER_THREAD];
        for (int b = a + 1; b < THREADS * PER_THREAD; b++) {
            CUdeviceptr pb = live[b / PER_THREAD][b % PER_THREAD];
            size_t sb = live_size[b / PER_THREAD][b % PER_THREAD];
            SIM_CHECK(pa + sa <= pb || pb + sb <= pa);
        }
    }
    for (int a = 0; a < THREADS * PER_THREAD; a++)
        SIM_CHECK_CU(cuMemFree_v2(live[a / PER_THREAD][a % PER_THREAD]), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 4 * GiB);
}
SIM_TEST(threads, threads_body, "SIMCUDA_MEMORY=4GiB")

/* A forked child goes on using the device, with a copy of the state. */
static void fork_body(void)
{
    CUdeviceptr a = 0, b = 0;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&a, 2 * MiB), CUDA_SUCCESS);
    fflush(NULL);
    pid_t pid = fork();
    SIM_CHECK(pid >= 0);
    if (pid == 0) {
        SIM_CHECK_EQ(sim_test_free(), 30 * MiB);
        SIM_CHECK_CU(cuMemAlloc_v2(&b, 2 * MiB), CUDA_SUCCESS);
        SIM_CHECK_EQ(b, SIM_TEST_BASE(0) + 2 * MiB);
        SIM_CHECK_CU(cuMemFree_v2(a), CUDA_SUCCESS);
        SIM_CHECK_CU(cuMemFree_v2(b), CUDA_SUCCESS);
        SIM_CHECK_EQ(sim_test_free(), 32 * MiB);
        _exit(0);
    }
    int status = -1;
    SIM_CHECK_EQ(waitpid(pid, &status, 0), pid);
    SIM_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    SIM_CHECK_EQ(sim_test_free(), 30 * MiB); /* the parent's state is its own */
    SIM_CHECK_CU(cuMemFree_v2(a), CUDA_SUCCESS);
}
SIM_TEST(fork_child, fork_body, "SIMCUDA_MEMORY=32MiB")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(devices_default),
        cmocka_unit_test(multiple_devices),
        cmocka_unit_test(env_malformed),
        cmocka_unit_test(env_out_of_range),
        cmocka_unit_test(identity),
        cmocka_unit_test(identity_malformed),
        cmocka_unit_test(no_devices),
        cmocka_unit_test(primary_ctx_refcount),
        cmocka_unit_test(primary_ctx_reset),
        cmocka_unit_test(created_contexts),
        cmocka_unit_test(current_context_per_thread),
        cmocka_unit_test(threads),
        cmocka_unit_test(fork_child),
    };
    return cmocka_run_group_tests_name("sim_context", tests, NULL, NULL);
}
