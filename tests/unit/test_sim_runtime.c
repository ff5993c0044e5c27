/* test_sim_runtime.c - the simulated CUDA runtime: how it reaches the
 * driver (the 440 cuGetProcAddress_v2 look-ups of cudart_lookups.h, in
 * order, before cuInit), its memory calls and what they charge, devices per
 * thread, reset, last-error semantics, error strings, versions and
 * cudaGetDriverEntryPoint[ByVersion].  The static archive and the absence of
 * libcuda are covered by tests/e2e/test_sim_runtime.py. */
#include <dlfcn.h>
#include <pthread.h>

#include "sim_test.h"

static const struct row {
    const char *name;
    int version;
    int flags;
} rows[] = {
#include "cudart_lookups.h"
};

#define BASE SIM_TEST_BASE(0)

static void lookups_body(void)
{
    int n = 0;
    SIM_CHECK_RT(cudaGetDeviceCount(&n), cudaSuccess);
    SIM_CHECK_EQ(n, 1);
}

/* With SIMCUDA_LOG the driver names every look-up: they must be the rows,
 * in order, all before cuInit, and through cuGetProcAddress_v2 only. */
static void lookup_pattern(void **state)
{
    static char err[256 * 1024]; /* 440+ lines: more than sim_test_run_capture keeps */
    (void)state;
    memset(err, 0, sizeof err);
    char path[] = "/tmp/sim_rt_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        sim_test_clear_env();
        setenv("SIMCUDA_LOG", "1", 1);
        lookups_body();
        exit(0);
    }
    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    ssize_t len = pread(fd, err, sizeof err - 1, 0);
    close(fd);
    unlink(path);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(len > 0);

    size_t next = 0;
    int saw_init = 0;
    for (char *line = strtok(err, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char name[128];
        int version = -1;
        unsigned long long flags = 99;
        assert_null(strstr(line, "simcuda: cuGetProcAddress(")); /* never the v1 */
        if (strncmp(line, "simcuda: cuInit(", 16) == 0) {
            assert_int_equal(next, sizeof rows / sizeof rows[0]); /* after every look-up */
            saw_init = 1;
            continue;
        }
        if (strncmp(line, "simcuda: cuGetProcAddress_v2(\"", 30) != 0)
            continue;
        name[0] = '\0';
        if (sscanf(line + 30, "%127[^\"]\", %d, %llu)", name, &version, &flags) < 2 &&
            line[30] == '"')
            sscanf(line + 30, "\", %d, %llu)", &version, &flags); /* the empty name */
        assert_true(next < sizeof rows / sizeof rows[0]);
        if (strcmp(name, rows[next].name) != 0 || version != rows[next].version ||
            flags != (unsigned long long)rows[next].flags)
            fail_msg("look-up %zu: got (\"%s\", %d, %llu), NVIDIA's runtime asks "
                     "(\"%s\", %d, %d)", next, name, version, flags, rows[next].name,
                     rows[next].version, rows[next].flags);
        next++;
    }
    assert_int_equal(next, 440);
    assert_true(saw_init);
}

static void memory_body(void)
{
    void *p = NULL, *q = NULL;
    size_t f = 0, t = 0, pitch = 0;
    SIM_CHECK_RT(cudaMalloc(&p, 3 * MiB), cudaSuccess);
    SIM_CHECK_EQ((uintptr_t)p, BASE);
    SIM_CHECK_RT(cudaMemGetInfo(&f, &t), cudaSuccess);
    SIM_CHECK_EQ(f, 60 * MiB);
    SIM_CHECK_EQ(t, 64 * MiB);
    SIM_CHECK_RT(cudaMemGetInfo(NULL, &t), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
    SIM_CHECK_RT(cudaFree(p), cudaErrorInvalidValue); /* double free */
    SIM_CHECK_RT(cudaFree(NULL), cudaSuccess);
    q = &f;
    SIM_CHECK_RT(cudaMalloc(&q, 0), cudaSuccess); /* NVIDIA's: success, NULL */
    SIM_CHECK(q == NULL);
    SIM_CHECK_RT(cudaMalloc(NULL, 10), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaMalloc(&p, 65 * MiB), cudaErrorMemoryAllocation);

    SIM_CHECK_RT(cudaMallocPitch(&p, &pitch, 100, 10), cudaSuccess);
    SIM_CHECK_EQ(pitch, 512);
    SIM_CHECK_EQ((uintptr_t)p, BASE);
    SIM_CHECK_RT(cudaMallocPitch(&q, NULL, 100, 10), cudaErrorInvalidValue);
    struct cudaPitchedPtr pp;
    struct cudaExtent ext = {100, 10, 4};
    SIM_CHECK_RT(cudaMalloc3D(&pp, ext), cudaSuccess);
    SIM_CHECK_EQ(pp.pitch, 512);
    SIM_CHECK_EQ(pp.xsize, 100);
    SIM_CHECK_EQ(pp.ysize, 10);
    SIM_CHECK_EQ((uintptr_t)pp.ptr, BASE + 10 * 512); /* 512 x 10 x 4 after p */
    SIM_CHECK_RT(cudaMalloc3D(NULL, ext), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
    SIM_CHECK_RT(cudaFree(pp.ptr), cudaSuccess);

    SIM_CHECK_RT(cudaMallocManaged(&p, 1000, cudaMemAttachGlobal), cudaSuccess);
    memset(p, 7, 1000);
    SIM_CHECK_RT(cudaMallocManaged(&q, 1000, 0), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
    SIM_CHECK_RT(cudaMallocHost(&p, 5000), cudaSuccess);
    memset(p, 7, 5000);
    SIM_CHECK_RT(cudaHostAlloc(&q, 100, cudaHostAllocMapped | cudaHostAllocPortable),
                 cudaSuccess);
    SIM_CHECK_RT(cudaHostAlloc(&q, 100, 0x40), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaFree(p), cudaErrorInvalidValue); /* host memory */
    SIM_CHECK_RT(cudaFreeHost(p), cudaSuccess);
    SIM_CHECK_RT(cudaFreeHost(q), cudaSuccess);
    SIM_CHECK_RT(cudaFreeHost(q), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaFreeHost(NULL), cudaSuccess);
    SIM_CHECK_RT(cudaMemGetInfo(&f, &t), cudaSuccess);
    SIM_CHECK_EQ(f, 64 * MiB);
}
SIM_TEST(memory, memory_body, "SIMCUDA_MEMORY=64MiB")

static void async_body(void)
{
    void *a = NULL, *b = NULL, *c = NULL;
    cudaMemPool_t pool = NULL;
    cudaStream_t s = (cudaStream_t)(uintptr_t)0x42;
    SIM_CHECK_RT(cudaMallocAsync(&a, 3 * MiB, s), cudaSuccess);
    SIM_CHECK_EQ((uintptr_t)a, BASE);
    SIM_CHECK_RT(cudaMallocAsync_ptsz(&b, 100, NULL), cudaSuccess);
    SIM_CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    SIM_CHECK_RT(cudaDeviceGetDefaultMemPool(&pool, 1), cudaErrorInvalidDevice);
    SIM_CHECK_RT(cudaDeviceGetDefaultMemPool(NULL, 0), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaMallocFromPoolAsync(&c, 2 * MiB, pool, s), cudaSuccess);
    SIM_CHECK_RT(cudaFreeAsync(c, s), cudaSuccess);
    SIM_CHECK_RT(cudaMallocFromPoolAsync_ptsz(&c, 2 * MiB, pool, s), cudaSuccess);
    SIM_CHECK_RT(cudaFreeAsync_ptsz(c, s), cudaSuccess);
    SIM_CHECK_RT(cudaFreeAsync(a, s), cudaSuccess);
    SIM_CHECK_RT(cudaFreeAsync(a, s), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaFreeAsync_ptsz(b, s), cudaSuccess);
    SIM_CHECK_RT(cudaMallocAsync(NULL, 1, s), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaMallocAsync(&a, 65 * MiB, s), cudaErrorMemoryAllocation);
}
SIM_TEST(stream_ordered, async_body, "SIMCUDA_MEMORY=64MiB")

static void *device_of_new_thread(void *arg)
{
    int *dev = arg;
    void *p = NULL;
    SIM_CHECK_RT(cudaGetDevice(dev), cudaSuccess); /* each thread starts on device 0 */
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaSuccess);
    SIM_CHECK_EQ((uintptr_t)p, SIM_TEST_BASE(0));
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
    return NULL;
}

static void devices_body(void)
{
    int n = 0, dev = -1;
    void *p = NULL;
    pthread_t t;
    SIM_CHECK_RT(cudaGetDeviceCount(&n), cudaSuccess);
    SIM_CHECK_EQ(n, 2);
    SIM_CHECK_RT(cudaGetDeviceCount(NULL), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaGetDevice(&dev), cudaSuccess);
    SIM_CHECK_EQ(dev, 0);
    SIM_CHECK_RT(cudaSetDevice(1), cudaSuccess);
    SIM_CHECK_RT(cudaGetDevice(&dev), cudaSuccess);
    SIM_CHECK_EQ(dev, 1);
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaSuccess);
    SIM_CHECK_EQ((uintptr_t)p, SIM_TEST_BASE(1));
    SIM_CHECK_RT(cudaSetDevice(2), cudaErrorInvalidDevice);
    SIM_CHECK_RT(cudaSetDevice(-1), cudaErrorInvalidDevice);
    SIM_CHECK_RT(cudaGetDevice(NULL), cudaErrorInvalidValue);
    SIM_CHECK_EQ(pthread_create(&t, NULL, device_of_new_thread, &dev), 0);
    SIM_CHECK_EQ(pthread_join(t, NULL), 0);
    SIM_CHECK_EQ(dev, 0);
    SIM_CHECK_RT(cudaGetDevice(&dev), cudaSuccess);
    SIM_CHECK_EQ(dev, 1); /* this thread's device is its own */
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
    SIM_CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
}
SIM_TEST(devices_per_thread, devices_body, "SIMCUDA_DEVICES=2")

static void reset_body(void)
{
    void *p = NULL, *h = NULL;
    size_t f = 0, t = 0;
    SIM_CHECK_RT(cudaMalloc(&p, 8 * MiB), cudaSuccess);
    SIM_CHECK_RT(cudaMallocHost(&h, 100), cudaSuccess);
    SIM_CHECK_RT(cudaDeviceReset(), cudaSuccess);
    SIM_CHECK_RT(cudaMemGetInfo(&f, &t), cudaSuccess);
    SIM_CHECK_EQ(f, 64 * MiB);
    SIM_CHECK_RT(cudaFree(p), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaFreeHost(h), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaMalloc(&p, 8 * MiB), cudaSuccess); /* usable again */
    SIM_CHECK_EQ((uintptr_t)p, BASE);
}
SIM_TEST(device_reset, reset_body, "SIMCUDA_MEMORY=64MiB")

static void errors_body(void)
{
    void *p = NULL;
    int v = 0;
    SIM_CHECK_RT(cudaGetLastError(), cudaSuccess);
    SIM_CHECK_RT(cudaMalloc(&p, 2 * GiB), cudaErrorMemoryAllocation);
    SIM_CHECK_RT(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    SIM_CHECK_RT(cudaPeekAtLastError(), cudaErrorMemoryAllocation); /* peek keeps it */
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaSuccess);                /* success keeps it too */
    SIM_CHECK_RT(cudaGetLastError(), cudaErrorMemoryAllocation);
    SIM_CHECK_RT(cudaGetLastError(), cudaSuccess);                 /* get resets */
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
    SIM_CHECK(strcmp(cudaGetErrorName(cudaErrorMemoryAllocation),
                     "cudaErrorMemoryAllocation") == 0);
    SIM_CHECK(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
    SIM_CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
    SIM_CHECK(strcmp(cudaGetErrorName((cudaError_t)12345), "unrecognized error code") == 0);
    SIM_CHECK_RT(cudaRuntimeGetVersion(&v), cudaSuccess);
    SIM_CHECK_EQ(v, 13000);
    SIM_CHECK_RT(cudaDriverGetVersion(&v), cudaSuccess);
    SIM_CHECK_EQ(v, 13000);
    SIM_CHECK_RT(cudaRuntimeGetVersion(NULL), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaDriverGetVersion(NULL), cudaErrorInvalidValue);
}
SIM_TEST(last_error_and_strings, errors_body, "SIMCUDA_MEMORY=1GiB")

static void no_device_body(void)
{
    int n = -1, v = 0;
    void *p = NULL;
    SIM_CHECK_RT(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    SIM_CHECK_EQ(n, 0);
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaErrorNoDevice);
    SIM_CHECK_RT(cudaSetDevice(0), cudaErrorNoDevice);
    SIM_CHECK_RT(cudaDriverGetVersion(&v), cudaSuccess); /* the driver is there */
    SIM_CHECK_EQ(v, 13000);
    SIM_CHECK_RT(cudaGetLastError(), cudaErrorNoDevice);
}
SIM_TEST(no_device, no_device_body, "SIMCUDA_DEVICES=0")

static void entry_points_body(void)
{
    void *fn = NULL, *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    enum cudaDriverEntryPointQueryResult st = (enum cudaDriverEntryPointQueryResult)99;
    SIM_CHECK(h != NULL);
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &st), cudaSuccess);
    SIM_CHECK(fn == dlsym(h, "cuMemAlloc_v2"));
    SIM_CHECK_EQ(st, cudaDriverEntryPointSuccess);
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuMemCreate", &fn, cudaEnableDefault, NULL),
                 cudaSuccess);
    SIM_CHECK(fn == dlsym(h, "cuMemCreate"));
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn,
                                         cudaEnablePerThreadDefaultStream, &st), cudaSuccess);
    SIM_CHECK(fn == dlsym(h, "cuMemAllocAsync_ptsz"));
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn, cudaEnableLegacyStream, &st),
                 cudaSuccess);
    SIM_CHECK(fn == dlsym(h, "cuMemAllocAsync"));
    SIM_CHECK_RT(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 2000, 0, &st),
                 cudaSuccess);
    SIM_CHECK(fn == dlsym(h, "cuMemAlloc"));
    SIM_CHECK_RT(cudaGetDriverEntryPointByVersion("cuMemMap", &fn, 12000, 0, &st), cudaSuccess);
    SIM_CHECK(fn == dlsym(h, "cuMemMap"));
    /* Documented: what the driver lacks is success with NULL and a status. */
    fn = &fn;
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuNoSuchThing", &fn, 0, &st), cudaSuccess);
    SIM_CHECK(fn == NULL);
    SIM_CHECK_EQ(st, cudaDriverEntryPointSymbolNotFound);
    SIM_CHECK_RT(cudaGetDriverEntryPointByVersion("cuMemRetainAllocationHandle", &fn, 10020, 0,
                                                  &st), cudaSuccess);
    SIM_CHECK(fn == NULL);
    SIM_CHECK_EQ(st, cudaDriverEntryPointVersionNotSufficent);
    SIM_CHECK_RT(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 13010, 0, &st),
                 cudaErrorInvalidValue); /* newer than the driver */
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuMemAlloc", NULL, 0, &st), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaGetDriverEntryPoint(NULL, &fn, 0, &st), cudaErrorInvalidValue);
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuMemAlloc", &fn, 8, &st), cudaErrorInvalidValue);

    /* What it returns works, and shares state with the runtime. */
    __typeof__(cuMemAlloc_v2) *alloc = NULL;
    void *p = NULL;
    SIM_CHECK_RT(cudaMalloc(&p, 2 * MiB), cudaSuccess);
    SIM_CHECK_RT(cudaGetDriverEntryPoint("cuMemAlloc", (void **)&alloc, 0, NULL), cudaSuccess);
    CUdeviceptr d = 0;
    SIM_CHECK_CU(alloc(&d, 2 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(d, BASE + 2 * MiB);
}
SIM_TEST(driver_entry_points, entry_points_body, NULL)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lookup_pattern),
        cmocka_unit_test(memory),
        cmocka_unit_test(stream_ordered),
        cmocka_unit_test(devices_per_thread),
        cmocka_unit_test(device_reset),
        cmocka_unit_test(last_error_and_strings),
        cmocka_unit_test(no_device),
        cmocka_unit_test(driver_entry_points),
    };
    return cmocka_run_group_tests_name("sim_runtime", tests, NULL, NULL);
}
