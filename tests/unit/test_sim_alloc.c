/* test_sim_alloc.c - the simulated device's linear memory: placement, 2 MiB
 * rounding, sub-allocation of small sizes, OOM exactly when nothing fits,
 * real fragmentation, cuMemGetInfo's truth, pitched and 32-bit entry
 * points, and the error codes of bad calls.  Each case runs in a child with
 * its own SIMCUDA_* environment (sim_test.h). */
#include "sim_test.h"

#define BASE SIM_TEST_BASE(0)

static CUdeviceptr alloc(size_t size)
{
    CUdeviceptr p = 0;
    SIM_CHECK_CU(cuMemAlloc_v2(&p, size), CUDA_SUCCESS);
    return p;
}

/* Large allocations take whole 2 MiB pages, first fit by address. */
static void placement_body(void)
{
    sim_test_ctx(0);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
    CUdeviceptr a = alloc(3 * MiB), b = alloc(2 * MiB), c = alloc(1 * MiB);
    SIM_CHECK_EQ(a, BASE);           /* pages 0-1 */
    SIM_CHECK_EQ(b, BASE + 4 * MiB); /* page 2 */
    SIM_CHECK_EQ(c, BASE + 6 * MiB); /* 1 MiB is large: page 3 */
    SIM_CHECK_EQ(sim_test_free(), 56 * MiB);
    SIM_CHECK_CU(cuMemFree_v2(a), CUDA_SUCCESS);
    CUdeviceptr d = alloc(4 * MiB);  /* fits the hole a left */
    SIM_CHECK_EQ(d, BASE);
    CUdeviceptr e = alloc(2 * MiB + 1); /* two pages, after c */
    SIM_CHECK_EQ(e, BASE + 8 * MiB);
    SIM_CHECK_EQ(sim_test_free(), 52 * MiB);
    CUdeviceptr all[] = {b, c, d, e};
    for (size_t i = 0; i < 4; i++)
        SIM_CHECK_CU(cuMemFree_v2(all[i]), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
}
SIM_TEST(placement, placement_body, "SIMCUDA_MEMORY=64MiB")

/* Below 1 MiB: 512-byte units inside shared 2 MiB pages, first fit. */
static void small_body(void)
{
    sim_test_ctx(0);
    CUdeviceptr a = alloc(1000), b = alloc(1), c = alloc(512);
    SIM_CHECK_EQ(a, BASE);        /* units 0-1 */
    SIM_CHECK_EQ(b, BASE + 1024); /* unit 2 */
    SIM_CHECK_EQ(c, BASE + 1536); /* unit 3 */
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB - 2 * MiB); /* a shared page counts whole */
    SIM_CHECK_CU(cuMemFree_v2(b), CUDA_SUCCESS);
    CUdeviceptr d = alloc(300);   /* reuses unit 2 */
    SIM_CHECK_EQ(d, BASE + 1024);
    CUdeviceptr big = alloc(2 * MiB); /* page 0 is shared: page 1 */
    SIM_CHECK_EQ(big, BASE + 2 * MiB);
    CUdeviceptr e = alloc(MiB - 1);   /* 2048 units from unit 4 of page 0 */
    SIM_CHECK_EQ(e, BASE + 4 * 512);
    CUdeviceptr f = alloc(MiB - 1);   /* 2044 units left in page 0: new page 2 */
    SIM_CHECK_EQ(f, BASE + 4 * MiB);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB - 6 * MiB);
    CUdeviceptr all[] = {a, c, d, big, e, f};
    for (size_t i = 0; i < 6; i++)
        SIM_CHECK_CU(cuMemFree_v2(all[i]), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB); /* empty shared pages went back */
    SIM_CHECK_EQ(alloc(2 * MiB), BASE);     /* and page 0 is whole again */
}
SIM_TEST(small_suballocation, small_body, "SIMCUDA_MEMORY=64MiB")

/* OOM exactly when the request cannot be placed. */
static void oom_body(void)
{
    CUdeviceptr p = 0;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 8 * MiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr all = alloc(8 * MiB);
    SIM_CHECK_EQ(sim_test_free(), 0);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 1), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemFree_v2(all), CUDA_SUCCESS);
    CUdeviceptr a = alloc(6 * MiB), b = alloc(2 * MiB - 512);
    SIM_CHECK_EQ(b, BASE + 6 * MiB);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 1), CUDA_ERROR_OUT_OF_MEMORY); /* no free page to share */
    SIM_CHECK_CU(cuMemFree_v2(a), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(b), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 8 * MiB);
}
SIM_TEST(oom_exact, oom_body, "SIMCUDA_MEMORY=8MiB")

/* Enough free memory in total, no contiguous run: OOM. */
static void fragmentation_body(void)
{
    CUdeviceptr p[4], q = 0;
    sim_test_ctx(0);
    for (int i = 0; i < 4; i++)
        p[i] = alloc(2 * MiB);
    SIM_CHECK_CU(cuMemFree_v2(p[0]), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(p[2]), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 4 * MiB);
    SIM_CHECK_CU(cuMemAlloc_v2(&q, 4 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_EQ(sim_test_free(), 4 * MiB); /* a failed call changes nothing */
    SIM_CHECK_EQ(alloc(3 * MiB / 2), BASE); /* what fits is placed */
    SIM_CHECK_EQ(alloc(2 * MiB), BASE + 4 * MiB);
}
SIM_TEST(fragmentation, fragmentation_body, "SIMCUDA_MEMORY=8MiB")

/* SIMCUDA_RESERVED: memory gone when the context exists, held by nothing
 * this process allocated, taken from the top of the device. */
static void reserved_body(void)
{
    CUcontext ctx;
    size_t f = 0, t = 0;
    CUdeviceptr p = 0;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    SIM_CHECK_EQ(f, 59 * MiB);
    SIM_CHECK_EQ(t, 64 * MiB);
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS); /* charged once */
    SIM_CHECK_EQ(sim_test_free(), 59 * MiB);
    SIM_CHECK_EQ(alloc(58 * MiB), BASE); /* pages 0..28; 29..31 are reserved */
    SIM_CHECK_EQ(sim_test_free(), 1 * MiB);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 1), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemGetInfo_v2(NULL, &t), CUDA_ERROR_INVALID_VALUE);
}
SIM_TEST(meminfo_reserved, reserved_body, "SIMCUDA_MEMORY=64MiB", "SIMCUDA_RESERVED=5MiB")

static void bad_calls_body(void)
{
    CUdeviceptr p = 0;
    int v = 0, n = 0;
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    SIM_CHECK_CU(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    SIM_CHECK_CU(cuDriverGetVersion(&v), CUDA_SUCCESS); /* needs no cuInit */
    SIM_CHECK_EQ(v, 13000);
    SIM_CHECK_CU(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    SIM_CHECK_CU(cuMemFree_v2(0), CUDA_ERROR_INVALID_CONTEXT);

    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAlloc_v2(NULL, 1), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree_v2(0), CUDA_SUCCESS);
    p = alloc(4096);
    SIM_CHECK_CU(cuMemFree_v2(p + 512), CUDA_ERROR_INVALID_VALUE); /* inside, not the start */
    SIM_CHECK_CU(cuMemFree_v2((CUdeviceptr)(uintptr_t)&v), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE); /* double free */
    void *h = NULL;
    SIM_CHECK_CU(cuMemAllocHost_v2(&h, 4096), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2((CUdeviceptr)(uintptr_t)h), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 16 * GiB);
}
SIM_TEST(bad_calls, bad_calls_body, NULL)

static void pitch_body(void)
{
    CUdeviceptr p = 0, q = 0, r = 0;
    size_t pitch = 0;
    sim_test_ctx(0);
    SIM_CHECK_CU(cuMemAllocPitch_v2(&p, &pitch, 100, 10, 4), CUDA_SUCCESS);
    SIM_CHECK_EQ(pitch, 512);
    SIM_CHECK_EQ(p, BASE); /* 5120 bytes: shared page 0 */
    SIM_CHECK_CU(cuMemAllocPitch_v2(&q, &pitch, 1000, 2048, 16), CUDA_SUCCESS);
    SIM_CHECK_EQ(pitch, 1024);
    SIM_CHECK_EQ(q, BASE + 2 * MiB); /* 1024 x 2048 = one whole page */
    SIM_CHECK_CU(cuMemAllocPitch_v2(&r, &pitch, 513, 1, 8), CUDA_SUCCESS);
    SIM_CHECK_EQ(pitch, 1024);
    SIM_CHECK_EQ(r, BASE + 10 * 512); /* after p's 10 units */
    SIM_CHECK_CU(cuMemAllocPitch_v2(&r, &pitch, 100, 10, 3), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocPitch_v2(&r, &pitch, 0, 10, 4), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocPitch_v2(&r, &pitch, 10, 0, 4), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocPitch_v2(&r, NULL, 10, 10, 4), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocPitch_v2(&r, &pitch, SIZE_MAX / 2, 4, 4), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAllocPitch_v2(&r, &pitch, 512, 64 * 1024, 4), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_EQ(sim_test_free(), 28 * MiB);
}
SIM_TEST(pitch, pitch_body, "SIMCUDA_MEMORY=32MiB")

/* The pre-3.2 ABI: 32-bit pointers from their own window, same placement. */
static void v1_body(void)
{
    CUdeviceptr_v1 a = 0, b = 0, c = 0;
    unsigned int pitch = 0, f = 0, t = 0;
    sim_test_ctx(0);
    uint64_t f0 = sim_test_free();
    SIM_CHECK_CU(cuMemAlloc(&a, 1000), CUDA_SUCCESS);
    SIM_CHECK(a >= 0x80000000u);
    SIM_CHECK_EQ(sim_test_free(), f0 - 2 * MiB);
    SIM_CHECK_CU(cuMemAlloc(&b, 3 * MiB), CUDA_SUCCESS);
    SIM_CHECK(b >= 0x80000000u && b != a);
    SIM_CHECK_EQ(sim_test_free(), f0 - 6 * MiB);
    SIM_CHECK_CU(cuMemAllocPitch(&c, &pitch, 100, 3, 4), CUDA_SUCCESS);
    SIM_CHECK_EQ(pitch, 512);
    SIM_CHECK_CU(cuMemAllocPitch(&c, &pitch, 100, 3, 5), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemFree_v2(b), CUDA_SUCCESS); /* a v1 pointer is a valid v2 pointer */
    SIM_CHECK_CU(cuMemFree(c), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc(&a, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAlloc(NULL, 1), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_EQ(sim_test_free(), f0);
    /* A v2 pointer cannot be freed through its truncated 32 bits. */
    alloc(2 * MiB);
    CUdeviceptr v2 = alloc(2 * MiB);
    SIM_CHECK_EQ(v2, BASE + 2 * MiB);
    SIM_CHECK_CU(cuMemFree((CUdeviceptr_v1)v2), CUDA_ERROR_INVALID_VALUE);

    /* 32-bit sizes clamp, as NVIDIA's do. */
    SIM_CHECK_CU(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    SIM_CHECK_EQ(f, 0xffffffffu);
    SIM_CHECK_EQ(t, 0xffffffffu);
    SIM_CHECK_CU(cuDeviceTotalMem(&t, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(t, 0xffffffffu);
    size_t t2 = 0;
    SIM_CHECK_CU(cuDeviceTotalMem_v2(&t2, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(t2, 8 * GiB);
}
SIM_TEST(v1_entry_points, v1_body, "SIMCUDA_MEMORY=8GiB")

/* Many small allocations: every one distinct, aligned, and all given back. */
static void many_small_body(void)
{
    enum { N = 3000 };
    static CUdeviceptr p[N];
    sim_test_ctx(0);
    for (int i = 0; i < N; i++) {
        p[i] = alloc((size_t)(i % 7 + 1) * 700);
        SIM_CHECK_EQ(p[i] % 512, 0);
        if (i > 0)
            SIM_CHECK(p[i] != p[i - 1]);
    }
    for (int i = 0; i < N; i += 2)
        SIM_CHECK_CU(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    for (int i = 0; i < N; i += 2)
        p[i] = alloc(600);
    for (int i = 0; i < N; i++)
        SIM_CHECK_CU(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 256 * MiB);
}
SIM_TEST(many_small, many_small_body, "SIMCUDA_MEMORY=256MiB")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(placement),
        cmocka_unit_test(small_suballocation),
        cmocka_unit_test(oom_exact),
        cmocka_unit_test(fragmentation),
        cmocka_unit_test(meminfo_reserved),
        cmocka_unit_test(bad_calls),
        cmocka_unit_test(pitch),
        cmocka_unit_test(v1_entry_points),
        cmocka_unit_test(many_small),
    };
    return cmocka_run_group_tests_name("sim_alloc", tests, NULL, NULL);
}
