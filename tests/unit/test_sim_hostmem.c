/* test_sim_hostmem.c - memory the simulated device backs with real host
 * pages: managed memory (charged to the device in whole pages, no
 * contiguity needed) and pinned host memory (charged to no device), their
 * flags and their error codes. */
#include "sim_test.h"

static void managed_body(void)
{
    CUdeviceptr m = 0, p[8], q = 0;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAllocManaged(&m, 3 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    SIM_CHECK_EQ(m % 4096, 0);
    memset((void *)(uintptr_t)m, 0xab, 3 * MiB); /* real memory the program may touch */
    SIM_CHECK_EQ(((unsigned char *)(uintptr_t)m)[3 * MiB - 1], 0xab);
    SIM_CHECK_EQ(sim_test_free(), 12 * MiB); /* charged as resident: 2 pages */
    SIM_CHECK_CU(cuMemFreeHost((void *)(uintptr_t)m), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeAsync(m, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree_v2(m), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);

    SIM_CHECK_CU(cuMemAllocManaged(&m, 1, CU_MEM_ATTACH_HOST), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(m), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocManaged(&m, 1, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocManaged(&m, 1, 3), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocManaged(&m, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocManaged(NULL, 1, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocManaged(&m, 16 * MiB + 1, CU_MEM_ATTACH_GLOBAL),
                 CUDA_ERROR_OUT_OF_MEMORY);

    /* Fragment the device: managed memory still fits, linear memory does not. */
    for (int i = 0; i < 8; i++)
        SIM_CHECK_CU(cuMemAlloc_v2(&p[i], 2 * MiB), CUDA_SUCCESS);
    for (int i = 0; i < 8; i += 2)
        SIM_CHECK_CU(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&q, 4 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemAllocManaged(&m, 8 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 0);
    SIM_CHECK_CU(cuMemFree_v2(m), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 8 * MiB);
}
SIM_TEST(managed, managed_body, "SIMCUDA_MEMORY=16MiB")

static void pinned_body(void)
{
    void *h = NULL, *h2 = NULL, *h3 = NULL;
    int local = 0;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocHost_v2(&h, 100), CUDA_ERROR_INVALID_CONTEXT);
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAllocHost_v2(&h, 10000), CUDA_SUCCESS);
    SIM_CHECK_EQ((uintptr_t)h % 4096, 0);
    memset(h, 1, 10000);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB); /* host memory: no device charge */
    SIM_CHECK_CU(cuMemHostAlloc(&h2, 64 * MiB,
                                CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                    CU_MEMHOSTALLOC_WRITECOMBINED),
                 CUDA_SUCCESS);
    ((char *)h2)[64 * MiB - 1] = 2;
    SIM_CHECK_CU(cuMemAllocHost(&h3, 100u), CUDA_SUCCESS); /* the 32-bit-size entry point */
    SIM_CHECK_CU(cuMemHostAlloc(&h3, 100, 8), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemHostAlloc(&h3, 0, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemHostAlloc(NULL, 10, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree_v2((CUdeviceptr)(uintptr_t)h), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeHost(&local), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeHost((char *)h2 + 4096), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeHost(NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeHost(h2), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeHost(h3), CUDA_SUCCESS);
}
SIM_TEST(pinned_host, pinned_body, "SIMCUDA_MEMORY=16MiB")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(managed),
        cmocka_unit_test(pinned_host),
    };
    return cmocka_run_group_tests_name("sim_hostmem", tests, NULL, NULL);
}
