/* test_sim_vmm.c - virtual memory management on the simulated device:
 * granularity, physical handles charged without contiguity, reservations
 * that cost nothing, map/unmap accounting with reference counts (memory
 * returns only after the last release AND unmap), retain, and the error
 * codes of bad calls. */
#include "sim_test.h"

#define VMM_BASE(d) (SIM_TEST_BASE(d) + UINT64_C(0x8000000000))

static CUmemAllocationProp prop_at(CUmemLocationType type, int id)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = type;
    prop.location.id = id;
    return prop;
}

static CUmemGenericAllocationHandle create(size_t size)
{
    CUmemAllocationProp prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    CUmemGenericAllocationHandle h = 0;
    SIM_CHECK_CU(cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS);
    SIM_CHECK(h != 0);
    return h;
}

static CUdeviceptr reserve(size_t size)
{
    CUdeviceptr p = 0;
    SIM_CHECK_CU(cuMemAddressReserve(&p, size, 0, 0, 0), CUDA_SUCCESS);
    return p;
}

static void granularity_body(void)
{
    size_t g = 0;
    CUmemAllocationProp prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_ERROR_NOT_INITIALIZED);
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(g, 2 * MiB);
    g = 0;
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(g, 2 * MiB);
    prop = prop_at(CU_MEM_LOCATION_TYPE_HOST, 0);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    prop = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_SUCCESS);
    prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 7);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_ERROR_INVALID_VALUE);
    prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, (CUmemAllocationGranularity_flags)2),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(&g, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemGetAllocationGranularity(NULL, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 CUDA_ERROR_INVALID_VALUE);
}
SIM_TEST(granularity, granularity_body, NULL)

/* create -> map -> release -> unmap: the pages return at the unmap. */
static void lifecycle_body(void)
{
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0},
                              CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    sim_test_ctx(0);
    CUmemGenericAllocationHandle h = create(4 * MiB);
    SIM_CHECK_EQ(sim_test_free(), 60 * MiB);
    CUdeviceptr va = reserve(16 * MiB);
    SIM_CHECK_EQ(va, VMM_BASE(0));
    SIM_CHECK_EQ(sim_test_free(), 60 * MiB); /* addresses cost no memory */
    SIM_CHECK_CU(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemSetAccess(va, 4 * MiB, &access, 1), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 60 * MiB); /* still mapped */
    SIM_CHECK_CU(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE); /* gone */
    SIM_CHECK_CU(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressFree(va, 16 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAddressFree(va, 16 * MiB), CUDA_ERROR_INVALID_VALUE);

    /* create -> map -> unmap -> release: the pages return at the release. */
    h = create(2 * MiB);
    va = reserve(2 * MiB);
    SIM_CHECK_CU(cuMemMap(va, 2 * MiB, 0, h, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemUnmap(va, 2 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 62 * MiB);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
    SIM_CHECK_CU(cuMemAddressFree(va, 2 * MiB), CUDA_SUCCESS);
}
SIM_TEST(create_map_release_unmap, lifecycle_body, "SIMCUDA_MEMORY=64MiB")

/* cuMemRetainAllocationHandle adds a reference; one handle mapped twice
 * holds its pages until both mappings are gone. */
static void retain_body(void)
{
    CUmemGenericAllocationHandle h2 = 0;
    sim_test_ctx(0);
    CUmemGenericAllocationHandle h = create(4 * MiB);
    CUdeviceptr va = reserve(32 * MiB);
    SIM_CHECK_CU(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemMap(va + 8 * MiB, 2 * MiB, 2 * MiB, h, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + MiB + 3)),
                 CUDA_SUCCESS);
    SIM_CHECK_EQ(h2, h);
    SIM_CHECK_CU(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 5 * MiB)),
                 CUDA_ERROR_INVALID_VALUE); /* a hole */
    SIM_CHECK_CU(cuMemRetainAllocationHandle(NULL, (void *)(uintptr_t)va),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS); /* cuMemCreate's reference */
    SIM_CHECK_CU(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 60 * MiB);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS); /* the retained one */
    SIM_CHECK_CU(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE); /* no references left */
    SIM_CHECK_EQ(sim_test_free(), 60 * MiB); /* the second mapping holds it */
    SIM_CHECK_CU(cuMemUnmap(va + 8 * MiB, 2 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
    SIM_CHECK_CU(cuMemAddressFree(va, 32 * MiB), CUDA_SUCCESS);
}
SIM_TEST(retain_adds_reference, retain_body, "SIMCUDA_MEMORY=64MiB")

static void map_errors_body(void)
{
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0},
                              CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    sim_test_ctx(0);
    CUmemGenericAllocationHandle h = create(4 * MiB), g = create(2 * MiB);
    CUdeviceptr va = reserve(8 * MiB);
    SIM_CHECK_CU(cuMemMap(va, 3 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);     /* size */
    SIM_CHECK_CU(cuMemMap(va + 1, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* address */
    SIM_CHECK_CU(cuMemMap(va, 4 * MiB, 2 * MiB, h, 0), CUDA_ERROR_INVALID_VALUE); /* past end */
    SIM_CHECK_CU(cuMemMap(va, 2 * MiB, 0, h, 1), CUDA_ERROR_INVALID_VALUE);     /* flags */
    SIM_CHECK_CU(cuMemMap(va, 2 * MiB, 0, 12345, 0), CUDA_ERROR_INVALID_VALUE); /* handle */
    SIM_CHECK_CU(cuMemMap(va + 6 * MiB, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* past
                                                                         the reservation */
    SIM_CHECK_CU(cuMemMap(SIM_TEST_BASE(0), 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemMap(va + 2 * MiB, 2 * MiB, 0, g, 0), CUDA_ERROR_INVALID_VALUE); /* mapped */
    SIM_CHECK_CU(cuMemMap(va + 4 * MiB, 2 * MiB, 0, g, 0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemSetAccess(va, 6 * MiB, &access, 1), CUDA_SUCCESS); /* across both */
    SIM_CHECK_CU(cuMemSetAccess(va, 8 * MiB, &access, 1), CUDA_ERROR_INVALID_VALUE); /* hole */
    SIM_CHECK_CU(cuMemSetAccess(va, 2 * MiB, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemSetAccess(va, 2 * MiB, &access, 0), CUDA_ERROR_INVALID_VALUE);
    access.location.id = 3;
    SIM_CHECK_CU(cuMemSetAccess(va, 2 * MiB, &access, 1), CUDA_ERROR_INVALID_DEVICE);
    access.location.id = 0;
    access.flags = (CUmemAccess_flags)2;
    SIM_CHECK_CU(cuMemSetAccess(va, 2 * MiB, &access, 1), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    SIM_CHECK_CU(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);  /* part of a mapping */
    SIM_CHECK_CU(cuMemUnmap(va + 2 * MiB, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemUnmap(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);  /* runs into a hole */
    SIM_CHECK_CU(cuMemUnmap(va, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemUnmap(va, 6 * MiB), CUDA_SUCCESS); /* two whole adjacent mappings */
    SIM_CHECK_CU(cuMemUnmap(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE); /* not mapped any more */
    SIM_CHECK_CU(cuMemAddressFree(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE); /* wrong size */
    SIM_CHECK_CU(cuMemAddressFree(va, 8 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemRelease(g), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 64 * MiB);
}
SIM_TEST(map_errors, map_errors_body, "SIMCUDA_MEMORY=64MiB")

static void reserve_body(void)
{
    CUdeviceptr a = 0, b = 0, c = 0, d = 0;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS); /* no context needed: device 0's window */
    SIM_CHECK_CU(cuMemAddressReserve(&a, 4 * MiB, 0, VMM_BASE(0) + 64 * MiB, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(a, VMM_BASE(0) + 64 * MiB); /* hint honoured */
    SIM_CHECK_CU(cuMemAddressReserve(&b, 4 * MiB, 0, VMM_BASE(0) + 66 * MiB, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(b, VMM_BASE(0)); /* hint taken: lowest free */
    SIM_CHECK_CU(cuMemAddressReserve(&c, 2 * MiB, 16 * MiB, 0, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(c, VMM_BASE(0) + 16 * MiB); /* alignment honoured */
    SIM_CHECK_CU(cuMemAddressReserve(&d, 64 * GiB, 0, 0, 0), CUDA_SUCCESS); /* > capacity */
    SIM_CHECK_CU(cuMemAddressReserve(&d, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressReserve(&d, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressReserve(&d, 2 * MiB, 3, 0, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressReserve(&d, 2 * MiB, 0, VMM_BASE(0) + 1, 0),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressReserve(&d, 2 * MiB, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressReserve(NULL, 2 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemAddressReserve(&d, 1024 * GiB, 0, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
    /* The current context's device picks the window; a hint picks its own. */
    sim_test_ctx(1);
    SIM_CHECK_CU(cuMemAddressReserve(&d, 2 * MiB, 0, 0, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(d, VMM_BASE(1));
    SIM_CHECK_CU(cuMemAddressReserve(&d, 2 * MiB, 0, VMM_BASE(0) + 32 * MiB, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(d, VMM_BASE(0) + 32 * MiB);
    SIM_CHECK_CU(cuMemAddressFree(a, 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAddressFree(b, 4 * MiB), CUDA_SUCCESS);
}
SIM_TEST(address_reserve, reserve_body, "SIMCUDA_DEVICES=2")

static void create_body(void)
{
    CUmemGenericAllocationHandle h = 0, hh = 0;
    CUmemAllocationProp prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    CUdeviceptr p[4];
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS); /* no context needed */
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 1), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemCreate(NULL, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuMemCreate(&h, 18 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    prop.type = CU_MEM_ALLOCATION_TYPE_MANAGED;
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 9);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    prop = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    prop = prop_at(CU_MEM_LOCATION_TYPE_HOST, 0);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);

    /* Host memory is charged to no device. */
    sim_test_ctx(0);
    prop = prop_at(CU_MEM_LOCATION_TYPE_HOST, 0);
    SIM_CHECK_CU(cuMemCreate(&hh, 64 * MiB, &prop, 0), CUDA_SUCCESS);
    prop = prop_at(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
    SIM_CHECK_CU(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 16 * MiB);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemRelease(hh), CUDA_SUCCESS);

    /* Device memory needs no contiguous pages. */
    for (int i = 0; i < 4; i++)
        SIM_CHECK_CU(cuMemAlloc_v2(&p[i], 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(p[0]), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(p[2]), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&p[0], 8 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    SIM_CHECK_CU(cuMemCreate(&h, 8 * MiB, &prop, 0), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 0);
    SIM_CHECK_CU(cuMemCreate(&hh, 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 8 * MiB);
}
SIM_TEST(create_physical, create_body, "SIMCUDA_MEMORY=16MiB")

/* Paged (the default outside these tests): a linear allocation takes free
 * pages wherever they are, as a GPU's MMU maps them.  Fill 16 MiB with 4 MiB
 * blocks, free every other one, and 8 MiB is granted from the two holes;
 * its addresses are one contiguous range. */
static void paged_body(void)
{
    CUdeviceptr p[4], big = 0, base = 0;
    size_t size = 0;
    sim_test_ctx(0);
    for (int i = 0; i < 4; i++)
        SIM_CHECK_CU(cuMemAlloc_v2(&p[i], 4 * MiB), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&big, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemFree_v2(p[0]), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemFree_v2(p[2]), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&big, 8 * MiB), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 0);
    SIM_CHECK_CU(cuMemGetAddressRange_v2(&base, &size, big + 8 * MiB - 1), CUDA_SUCCESS);
    SIM_CHECK(base == big && size == 8 * MiB);
    for (int i = 1; i < 4; i += 2)
        SIM_CHECK(big + 8 * MiB <= p[i] || p[i] + 4 * MiB <= big); /* no overlap */
    SIM_CHECK_CU(cuMemFree_v2(big), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 8 * MiB);
    /* small allocations still share pages */
    CUdeviceptr s1 = 0, s2 = 0;
    SIM_CHECK_CU(cuMemAlloc_v2(&s1, 4096), CUDA_SUCCESS);
    SIM_CHECK_CU(cuMemAlloc_v2(&s2, 4096), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 6 * MiB);
}
SIM_TEST(paged_linear_memory, paged_body, "SIMCUDA_MEMORY=16MiB", "SIMCUDA_CONTIGUOUS=0")

/* SIMCUDA_RESERVED is charged before the first byte, whatever the first call:
 * here a cuMemCreate with no context yet (PyTorch's expandable segments). */
static void reserved_first_body(void)
{
    CUmemGenericAllocationHandle h = 0;
    CUmemAllocationProp prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE, 0);
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    /* 64 MiB less the 32 MiB reserve: 48 MiB does not fit */
    SIM_CHECK_CU(cuMemCreate(&h, 48 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    SIM_CHECK_CU(cuMemCreate(&h, 32 * MiB, &prop, 0), CUDA_SUCCESS);
    sim_test_ctx(0);
    SIM_CHECK_EQ(sim_test_free(), 0);
    SIM_CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    SIM_CHECK_EQ(sim_test_free(), 32 * MiB);
}
SIM_TEST(reserved_before_the_first_cuMemCreate, reserved_first_body, "SIMCUDA_MEMORY=64MiB",
         "SIMCUDA_RESERVED=32MiB")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(granularity),
        cmocka_unit_test(create_map_release_unmap),
        cmocka_unit_test(retain_adds_reference),
        cmocka_unit_test(map_errors),
        cmocka_unit_test(address_reserve),
        cmocka_unit_test(create_physical),
        cmocka_unit_test(reserved_before_the_first_cuMemCreate),
        cmocka_unit_test(paged_linear_memory),
    };
    return cmocka_run_group_tests_name("sim_vmm", tests, NULL, NULL);
}
