/* test_sim_fault.c - SIMCUDA_FAIL, the fault sibling of every feature: the
 * Nth call of a driver or runtime symbol fails once ("sym:N") or from then
 * on ("sym:N+"), with the default error (out of memory for allocations,
 * unknown otherwise) or a forced one ("sym:N=CODE"); an injected failure
 * changes no state; malformed rules are reported once and ignored. */
#include "sim_test.h"

static void nth_call_body(void)
{
    CUdeviceptr p[4] = {0};
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&p[0], MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&p[1], MiB), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_EQ(p[1], 0); /* untouched */
    SIM_CHECK_EQ(sim_test_free(), 14 * MiB); /* nothing was taken */
    SIM_CHECK_CU(cuMemAlloc_v2(&p[2], MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(p[2], SIM_TEST_BASE(0) + 2 * MiB);
    SIM_CHECK_CU(cuMemAlloc_v2(&p[3], MiB), CUDA_SUCCESS);
    /* Counted per symbol: the v1 entry point has its own count. */
    CUdeviceptr_v1 q = 0;
    SIM_CHECK_CU(cuMemAlloc(&q, 100), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc(&q, 100), CUDA_SUCCESS);
}
SIM_TEST(nth_call_fails_once, nth_call_body, "SIMCUDA_FAIL=cuMemAlloc_v2:2",
         "SIMCUDA_MEMORY=16MiB")

static void from_on_body(void)
{
    CUdeviceptr p = 0;
    void *h = NULL;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAllocAsync(&p, 100, NULL), CUDA_SUCCESS);
    for (int i = 0; i < 5; i++)
        SIM_CHECK_CU(cuMemAllocAsync(&p, 100, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN); /* not an allocation */
    SIM_CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemHostAlloc(&h, 10, 0), CUDA_ERROR_INVALID_DEVICE); /* forced code */
    SIM_CHECK_CU(cuMemHostAlloc(&h, 10, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);
}
SIM_TEST(from_nth_call_on, from_on_body,
         "SIMCUDA_FAIL= cuMemAllocAsync:2+ , cuCtxSynchronize:1,cuMemHostAlloc:1=101")

/* A failed free leaves the allocation live; a failed VMM call too. */
static void no_state_change_body(void)
{
    CUdeviceptr p = 0;
    CUmemGenericAllocationHandle h = 0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_EQ(sim_test_free(), 12 * MiB);
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    /* Faults apply before anything else, even to look-ups. */
    void *fn = NULL;
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, NULL), CUDA_ERROR_UNKNOWN);
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, NULL), CUDA_SUCCESS);
}
SIM_TEST(failure_changes_nothing, no_state_change_body,
         "SIMCUDA_FAIL=cuMemFree_v2:1=1,cuMemCreate:1,cuGetProcAddress_v2:1",
         "SIMCUDA_MEMORY=16MiB")

static void unaffected_body(void)
{
    CUdeviceptr p = 0;
    sim_test_ctx(0);
    for (int i = 0; i < 3; i++) {
        SIM_CHECK_CU(cuMemAlloc_v2(&p, 100), CUDA_SUCCESS);
        SIM_CHECK_CU(cuMemFree_v2(p), CUDA_SUCCESS);
    }
}

static void malformed(void **state)
{
    static const char *const env[] = {
        "SIMCUDA_FAIL=cuMemAlloc_v2,cuFoo:1,cuMemAlloc_v2:0,cuMemAlloc_v2:x,"
        "cuMemFree_v2:1=abc,cuMemFree_v2:1=0,:3,cudaMalloc:1",
        NULL};
    char err[4096];
    (void)state;
    sim_test_run_capture(env, unaffected_body, err, sizeof err);
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_FAIL entry 'cuMemAlloc_v2': "
                                "expected symbol:N, symbol:N+ or symbol:N=CODE\n"));
    assert_non_null(strstr(err, "simcuda: ignoring SIMCUDA_FAIL entry 'cuFoo:1': 'cuFoo' is "
                                "not a function this library can fail\n"));
    assert_non_null(strstr(err, "entry 'cuMemAlloc_v2:0'"));
    assert_non_null(strstr(err, "entry 'cuMemAlloc_v2:x'"));
    assert_non_null(strstr(err, "entry 'cuMemFree_v2:1=abc'"));
    assert_non_null(strstr(err, "entry 'cuMemFree_v2:1=0'"));
    assert_non_null(strstr(err, "entry ':3'"));
    /* The runtime's entry is the runtime's to judge; this test never
     * calls the runtime, so nobody mentions it. */
    assert_null(strstr(err, "cudaMalloc"));
}

/* SIMCUDA_LOG shows every call, injected failures included. */
static void log_body(void)
{
    CUdeviceptr p = 0;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 4096), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 4096), CUDA_SUCCESS);
}

static void log_shows_faults(void **state)
{
    static const char *const env[] = {"SIMCUDA_FAIL=cuMemAlloc_v2:1", "SIMCUDA_LOG=1", NULL};
    char err[4096];
    (void)state;
    sim_test_run_capture(env, log_body, err, sizeof err);
    assert_non_null(strstr(err, "simcuda: cuInit(0) = CUDA_SUCCESS\n"));
    assert_non_null(strstr(err, "simcuda: cuMemAlloc_v2 (SIMCUDA_FAIL) = "
                                "CUDA_ERROR_OUT_OF_MEMORY\n"));
    assert_non_null(strstr(err, "simcuda: cuMemAlloc_v2(4096) -> 0x200000000000 = "
                                "CUDA_SUCCESS\n"));
}

/* Runtime rules: the runtime fails without calling the driver; a driver
 * fault shows through the runtime as NVIDIA's mapping says. */
static void runtime_body(void)
{
    void *p = NULL;
    size_t f = 0, t = 0;
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaErrorMemoryAllocation); /* cudaMalloc:1 */
    SIM_CHECK(p == NULL);
    SIM_CHECK_RT(cudaGetLastError(), cudaErrorMemoryAllocation);
    SIM_CHECK_RT(cudaGetLastError(), cudaSuccess);
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaErrorMemoryAllocation); /* cuMemAlloc_v2:1 */
    SIM_CHECK_RT(cudaMemGetInfo(&f, &t), cudaSuccess);
    SIM_CHECK_EQ(f, 16 * MiB);
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaSuccess);
    SIM_CHECK_RT(cudaFree(p), cudaErrorInvalidValue);             /* cuMemFree_v2:1=1 */
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
    SIM_CHECK_RT(cudaDeviceSynchronize(), cudaErrorNotSupported); /* cudaDeviceSynchronize:1=801 */
    SIM_CHECK_RT(cudaDeviceSynchronize(), cudaErrorUnknown);      /* :2+ */
    SIM_CHECK_RT(cudaDeviceSynchronize(), cudaErrorUnknown);
}
SIM_TEST(runtime_faults, runtime_body,
         "SIMCUDA_FAIL=cudaMalloc:1,cuMemAlloc_v2:1,cuMemFree_v2:1=1,"
         "cudaDeviceSynchronize:1=801,cudaDeviceSynchronize:2+",
         "SIMCUDA_MEMORY=16MiB")

static void runtime_unaffected_body(void)
{
    void *p = NULL;
    SIM_CHECK_RT(cudaMalloc(&p, 100), cudaSuccess);
    SIM_CHECK_RT(cudaFree(p), cudaSuccess);
}

static void runtime_malformed(void **state)
{
    static const char *const env[] = {"SIMCUDA_FAIL=cudaMalloc:0,cudaFoo:1,cudaGetLastError:1",
                                      NULL};
    char err[4096];
    (void)state;
    sim_test_run_capture(env, runtime_unaffected_body, err, sizeof err);
    assert_non_null(strstr(err, "simcudart: ignoring SIMCUDA_FAIL entry 'cudaMalloc:0': "
                                "expected symbol:N, symbol:N+ or symbol:N=CODE\n"));
    assert_non_null(strstr(err, "simcudart: ignoring SIMCUDA_FAIL entry 'cudaFoo:1'"));
    assert_non_null(strstr(err, "simcudart: ignoring SIMCUDA_FAIL entry 'cudaGetLastError:1'"));
    assert_null(strstr(err, "simcuda: ")); /* the driver leaves cuda* entries alone */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nth_call_fails_once),
        cmocka_unit_test(from_nth_call_on),
        cmocka_unit_test(failure_changes_nothing),
        cmocka_unit_test(malformed),
        cmocka_unit_test(log_shows_faults),
        cmocka_unit_test(runtime_faults),
        cmocka_unit_test(runtime_malformed),
    };
    return cmocka_run_group_tests_name("sim_fault", tests, NULL, NULL);
}
