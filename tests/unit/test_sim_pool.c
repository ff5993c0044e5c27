/* test_sim_pool.c - stream-ordered allocation and memory pools on the
 * simulated device: the default pool, charged at once and given back at
 * once, _ptsz variants, created pools with maxSize, destroying a pool with
 * live allocations, pools of another device, and error codes. */
#include "sim_test.h"

#define BASE SIM_TEST_BASE(0)
#define STREAM ((CUstream)(uintptr_t)0x1234) /* streams are opaque to the sim */

static CUmemPoolProps device_props(int dev)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    return props;
}

static void default_pool_body(void)
{
    CUdeviceptr a = 0, b = 0, c = 0, lin = 0;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAllocAsync(&a, 3 * MiB, NULL), CUDA_SUCCESS);
    SIM_CHECK_EQ(a, BASE);
    SIM_CHECK_EQ(sim_test_free(), 12 * MiB);
    SIM_CHECK_CU(cuMemAllocAsync_ptsz(&b, 100, STREAM), CUDA_SUCCESS);
    SIM_CHECK_EQ(b, BASE + 4 * MiB); /* placed like cuMemAlloc: a shared page */
    SIM_CHECK_CU(cuMemFreeAsync(a, STREAM), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 14 * MiB); /* release threshold 0: back at once */
    SIM_CHECK_CU(cuMemFreeAsync_ptsz(b, NULL), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);

    CUmemoryPool pool = NULL;
    SIM_CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    SIM_CHECK(pool != NULL);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&c, 16 * MiB, pool, STREAM), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocAsync(&a, 1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemAlloc_v2(&lin, 1), CUDA_ERROR_OUT_OF_MEMORY); /* same device memory */
    SIM_CHECK_CU(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE); /* the default pool */
    SIM_CHECK_CU(cuMemFree_v2(c), CUDA_SUCCESS); /* cuMemFree takes async memory too */
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);
}
SIM_TEST(default_pool, default_pool_body, "SIMCUDA_MEMORY=16MiB")

static void async_errors_body(void)
{
    CUdeviceptr a = 0, lin = 0;
    CUmemoryPool pool = NULL;
    SIM_CHECK_CU(cuMemAllocAsync(&a, 1, NULL), CUDA_ERROR_NOT_INITIALIZED);
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocAsync(&a, 1, NULL), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuMemFreeAsync(0, NULL), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS); /* needs no context */
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAllocAsync(NULL, 1, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocAsync(&a, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocAsync_ptsz(&a, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAlloc_v2(&lin, 100), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(lin, NULL), CUDA_ERROR_INVALID_VALUE); /* not async memory */
    SIM_CHECK_CU(cuMemFreeAsync(0, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocAsync(&a, 100, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(a + 512, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(a, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeAsync_ptsz(a, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&a, 1, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&a, 1, (CUmemoryPool)&a, NULL),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemPoolDestroy((CUmemoryPool)&a), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemPoolTrimTo((CUmemoryPool)&a, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDeviceGetDefaultMemPool(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 1), CUDA_ERROR_INVALID_DEVICE);
}
SIM_TEST(async_errors, async_errors_body, NULL)

static void created_pool_body(void)
{
    CUmemoryPool pool = NULL, other = NULL;
    CUmemPoolProps props = device_props(0);
    CUdeviceptr a = 0, b = 0;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS); /* needs no context */
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&a, 3 * MiB, pool, STREAM), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync_ptsz(&b, 1000, pool, STREAM), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 10 * MiB);
    /* Destroyed with allocations live: they stay valid until freed. */
    SIM_CHECK_CU(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&a, 1, pool, STREAM), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemPoolTrimTo(pool, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_EQ(sim_test_free(), 10 * MiB);
    SIM_CHECK_CU(cuMemFreeAsync(a, STREAM), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(b, STREAM), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);

    /* maxSize bounds the pool's live bytes. */
    props.maxSize = 4 * MiB;
    SIM_CHECK_CU(cuMemPoolCreate(&other, &props), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&a, 3 * MiB, other, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&b, 2 * MiB, other, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&b, 1 * MiB, other, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&a, 2 * MiB, other, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(b, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemPoolDestroy(other), CUDA_SUCCESS); /* empty: gone at once */
    SIM_CHECK_CU(cuMemPoolTrimTo(other, 0), CUDA_ERROR_INVALID_VALUE);

    props = device_props(0);
    SIM_CHECK_CU(cuMemPoolCreate(NULL, &props), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemPoolCreate(&pool, NULL), CUDA_ERROR_INVALID_VALUE);
    props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
    SIM_CHECK_CU(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
    props = device_props(5);
    SIM_CHECK_CU(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
    props.location.type = CU_MEM_LOCATION_TYPE_HOST;
    SIM_CHECK_CU(cuMemPoolCreate(&pool, &props), CUDA_ERROR_NOT_SUPPORTED);
    props.location.type = CU_MEM_LOCATION_TYPE_INVALID;
    SIM_CHECK_CU(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
}
SIM_TEST(created_pool, created_pool_body, "SIMCUDA_MEMORY=16MiB")

/* A pool allocates on its own device, whatever the current context. */
static void other_device_body(void)
{
    CUmemoryPool pool = NULL, def1 = NULL;
    CUmemPoolProps props = device_props(1);
    CUdeviceptr a = 0, b = 0;
    sim_test_ctx(1);
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&a, 4 * MiB, pool, NULL), CUDA_SUCCESS);
    SIM_CHECK_EQ(a, SIM_TEST_BASE(1));
    SIM_CHECK_CU(cuDeviceGetDefaultMemPool(&def1, 1), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocFromPoolAsync(&b, 2 * MiB, def1, NULL), CUDA_SUCCESS);
    SIM_CHECK_EQ(b, SIM_TEST_BASE(1) + 4 * MiB);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB); /* device 0 untouched */
    sim_test_ctx(1);
    SIM_CHECK_EQ(sim_test_free(), 10 * MiB);
    SIM_CHECK_CU(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFreeAsync(b, NULL), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);
}
SIM_TEST(pool_other_device, other_device_body, "SIMCUDA_MEMORY=16MiB", "SIMCUDA_DEVICES=2")

static cuuint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 99;
    SIM_CHECK_CU(cuMemPoolGetAttribute(pool, a, &v), CUDA_SUCCESS);
    return v;
}

/* What PyTorch's cudaMallocAsync backend relies on: with the release
 * threshold raised, freed blocks stay reserved in the pool (cuMemGetInfo
 * says so), are reused by a request they fit, and go back on TrimTo; the
 * attributes report reserved and used bytes and their high-water marks. */
static void pool_keeps_memory_body(void)
{
    CUmemoryPool pool = NULL;
    CUdeviceptr a = 0, b = 0, c = 0;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    cuuint64_t keep = UINT64_MAX;
    SIM_CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                 CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocAsync(&a, 3 * MiB, STREAM), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAllocAsync(&b, 1000, STREAM), CUDA_SUCCESS);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 * MiB + 1000);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB + 1024);
    SIM_CHECK_CU(cuMemFreeAsync(a, STREAM), CUDA_SUCCESS);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1000);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 3 * MiB + 1000);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB + 1024);
    SIM_CHECK_EQ(sim_test_free(), 10 * MiB); /* still held by the pool (and b's shared page) */
    SIM_CHECK_CU(cuMemAllocAsync(&c, 2 * MiB + 5, STREAM), CUDA_SUCCESS);
    SIM_CHECK_EQ(c, a); /* the cached block, reused */
    SIM_CHECK_CU(cuMemFreeAsync(c, STREAM), CUDA_SUCCESS);
    cuuint64_t zero = 0;
    SIM_CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 1000);
    SIM_CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 1024);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 * MiB + 1024);
    SIM_CHECK_CU(cuMemFreeAsync(b, STREAM), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);
}
SIM_TEST(pool_keeps_memory, pool_keeps_memory_body, "SIMCUDA_MEMORY=16MiB")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_pool),
        cmocka_unit_test(async_errors),
        cmocka_unit_test(created_pool),
        cmocka_unit_test(pool_other_device),
        cmocka_unit_test(pool_keeps_memory),
    };
    return cmocka_run_group_tests_name("sim_pool", tests, NULL, NULL);
}
