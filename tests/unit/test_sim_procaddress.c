/* test_sim_procaddress.c - cuGetProcAddress of the simulated driver: every
 * look-up NVIDIA's runtime 13.0 makes (cudart_lookups.h, generated from
 * tests/data/cudart-13.0-getprocaddress.tsv) gets the variant with the right
 * ABI - the same function as the exported symbol of that name - or
 * CUDA_ERROR_NOT_FOUND for what the sim does not implement; versions, flags,
 * symbolStatus and bad arguments. */
#include <dlfcn.h>

#include "sim_test.h"

static const struct row {
    const char *name;
    int version;
    int flags;
} rows[] = {
#include "cudart_lookups.h"
};

/* What the sim implements, written down from NVIDIA's headers and
 * documentation independently of the driver's own table: base name, the
 * exported variant, the first CUDA version that binds the base name to it,
 * and whether it is the per-thread-default-stream variant. */
static const struct fact {
    const char *base, *variant;
    int version, ptsz;
} facts[] = {
    {"cuInit", "cuInit", 2000, 0},
    {"cuDriverGetVersion", "cuDriverGetVersion", 2020, 0},
    {"cuGetProcAddress", "cuGetProcAddress", 11030, 0},
    {"cuGetProcAddress", "cuGetProcAddress_v2", 12000, 0},
    {"cuGetErrorString", "cuGetErrorString", 6000, 0},
    {"cuGetErrorName", "cuGetErrorName", 6000, 0},
    {"cuDeviceGet", "cuDeviceGet", 2000, 0},
    {"cuDeviceGetCount", "cuDeviceGetCount", 2000, 0},
    {"cuDeviceGetName", "cuDeviceGetName", 2000, 0},
    {"cuDeviceTotalMem", "cuDeviceTotalMem", 2000, 0},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020, 0},
    {"cuDeviceGetAttribute", "cuDeviceGetAttribute", 2000, 0},
    {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, 0},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", 7000, 0},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, 0},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset", 7000, 0},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 11000, 0},
    {"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState", 7000, 0},
    {"cuDevicePrimaryCtxSetFlags", "cuDevicePrimaryCtxSetFlags", 7000, 0},
    {"cuDevicePrimaryCtxSetFlags", "cuDevicePrimaryCtxSetFlags_v2", 11000, 0},
    {"cuCtxCreate", "cuCtxCreate_v2", 3020, 0},
    {"cuCtxCreate", "cuCtxCreate_v3", 11040, 0},
    {"cuCtxCreate", "cuCtxCreate_v4", 12050, 0},
    {"cuCtxDestroy", "cuCtxDestroy_v2", 4000, 0},
    {"cuCtxGetCurrent", "cuCtxGetCurrent", 4000, 0},
    {"cuCtxSetCurrent", "cuCtxSetCurrent", 4000, 0},
    {"cuCtxGetDevice", "cuCtxGetDevice", 2000, 0},
    {"cuCtxGetDevice", "cuCtxGetDevice_v2", 13000, 0},
    {"cuCtxSynchronize", "cuCtxSynchronize", 2000, 0},
    {"cuCtxSynchronize", "cuCtxSynchronize_v2", 13000, 0},
    {"cuMemGetInfo", "cuMemGetInfo", 2000, 0},
    {"cuMemGetInfo", "cuMemGetInfo_v2", 3020, 0},
    {"cuMemAlloc", "cuMemAlloc", 2000, 0},
    {"cuMemAlloc", "cuMemAlloc_v2", 3020, 0},
    {"cuMemAllocPitch", "cuMemAllocPitch", 2000, 0},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020, 0},
    {"cuMemFree", "cuMemFree", 2000, 0},
    {"cuMemFree", "cuMemFree_v2", 3020, 0},
    {"cuMemAllocManaged", "cuMemAllocManaged", 6000, 0},
    {"cuMemAllocHost", "cuMemAllocHost", 2000, 0},
    {"cuMemAllocHost", "cuMemAllocHost_v2", 3020, 0},
    {"cuMemHostAlloc", "cuMemHostAlloc", 2020, 0},
    {"cuMemFreeHost", "cuMemFreeHost", 2000, 0},
    {"cuMemAllocAsync", "cuMemAllocAsync", 11020, 0},
    {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", 11020, 1},
    {"cuMemFreeAsync", "cuMemFreeAsync", 11020, 0},
    {"cuMemFreeAsync", "cuMemFreeAsync_ptsz", 11020, 1},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, 0},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 11020, 1},
    {"cuMemPoolCreate", "cuMemPoolCreate", 11020, 0},
    {"cuMemPoolDestroy", "cuMemPoolDestroy", 11020, 0},
    {"cuMemPoolTrimTo", "cuMemPoolTrimTo", 11020, 0},
    {"cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 11020, 0},
    {"cuMemAddressReserve", "cuMemAddressReserve", 10020, 0},
    {"cuMemAddressFree", "cuMemAddressFree", 10020, 0},
    {"cuMemCreate", "cuMemCreate", 10020, 0},
    {"cuMemRelease", "cuMemRelease", 10020, 0},
    {"cuMemMap", "cuMemMap", 10020, 0},
    {"cuMemUnmap", "cuMemUnmap", 10020, 0},
    {"cuMemSetAccess", "cuMemSetAccess", 10020, 0},
    {"cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity", 10020, 0},
    {"cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", 11000, 0},
    {"cuMemPoolGetAttribute", "cuMemPoolGetAttribute", 11020, 0},
    {"cuMemPoolSetAttribute", "cuMemPoolSetAttribute", 11020, 0},
    {"cuMemGetAllocationPropertiesFromHandle", "cuMemGetAllocationPropertiesFromHandle", 10020, 0},
    {"cuMemExportToShareableHandle", "cuMemExportToShareableHandle", 10020, 0},
    {"cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle", 10020, 0},
    /* Only the _v2 ABI of these is simulated; it answers from the first
     * version of the name (cuda.h gives v1 and v2 the same parameters). */
    {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", 9020, 0},
    {"cuCtxPushCurrent", "cuCtxPushCurrent_v2", 4000, 0},
    {"cuCtxPopCurrent", "cuCtxPopCurrent_v2", 4000, 0},
    {"cuStreamWriteValue32", "cuStreamWriteValue32_v2", 8000, 0},
    {"cuMemGetAddressRange", "cuMemGetAddressRange_v2", 3020, 0},
    {"cuMemsetD32Async", "cuMemsetD32Async", 3020, 0},
};

/* The variant the rules choose, or NULL; *known says whether base exists. */
static const char *expected_variant(const char *base, int version, unsigned long long flags,
                                    int *known)
{
    const struct fact *legacy = NULL, *ptsz = NULL;
    *known = 0;
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        const struct fact *f = &facts[i];
        if (strcmp(f->base, base) != 0)
            continue;
        *known = 1;
        if (f->version > version)
            continue;
        if (f->ptsz && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
            ptsz = f;
        else if (!f->ptsz && (legacy == NULL || f->version > legacy->version))
            legacy = f;
    }
    return ptsz ? ptsz->variant : legacy ? legacy->variant : NULL;
}

static void *libcuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    SIM_CHECK(h != NULL);
    return h;
}

/* Checks one look-up against the rules; returns 1 when it was found. */
static int check_lookup(const char *name, int version, unsigned long long flags)
{
    int known;
    const char *want = expected_variant(name, version, flags, &known);
    void *pfn = (void *)&known;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
    CUresult r = cuGetProcAddress_v2(name, &pfn, version, flags, &st);
    if (want != NULL) {
        void *sym = dlsym(libcuda(), want);
        if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || pfn != sym || sym == NULL)
            sim_test_fail(__FILE__, __LINE__, "(\"%s\", %d, %llu): result %d status %d pfn %p, "
                          "expected %s at %p", name, version, flags, (int)r, (int)st, pfn, want,
                          sym);
        /* The 4-argument entry point answers the same. */
        void *pfn1 = NULL;
        SIM_CHECK_CU(cuGetProcAddress(name, &pfn1, version, flags), CUDA_SUCCESS);
        SIM_CHECK(pfn1 == sym);
        return 1;
    }
    CUdriverProcAddressQueryResult want_st = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                                   : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (r != CUDA_ERROR_NOT_FOUND || st != want_st || pfn != NULL)
        sim_test_fail(__FILE__, __LINE__, "(\"%s\", %d, %llu): result %d status %d pfn %p, "
                      "expected CUDA_ERROR_NOT_FOUND status %d", name, version, flags, (int)r,
                      (int)st, pfn, (int)want_st);
    return 0;
}

static int check_all_rows(void)
{
    int found = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        found += check_lookup(rows[i].name, rows[i].version, (unsigned long long)rows[i].flags);
    return found;
}

/* Every row of the TSV, before cuInit (allowed, as NVIDIA's) and after. */
static void every_row_body(void)
{
    SIM_CHECK_EQ(sizeof rows / sizeof rows[0], 440);
    SIM_CHECK(rows[0].name[0] == '\0' && rows[0].version == 0);
    int before = check_all_rows();
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    int after = check_all_rows();
    SIM_CHECK_EQ(before, after);
    /* 48 rows name what the sim implements (VMM is not among the runtime's
     * look-ups); update when the sim grows. */
    SIM_CHECK_EQ(before, 48);
    printf("    %d of %zu runtime look-ups answered by the sim\n", before,
           sizeof rows / sizeof rows[0]);
}
SIM_TEST(every_tsv_row, every_row_body, NULL)

/* Versions and flags of every variant, around each boundary. */
static void versions_body(void)
{
    static const int versions[] = {0, 1000, 2000, 2010, 2020, 3000, 3020, 4000, 6000, 7000,
                                   10010, 10020, 11000, 11020, 11030, 12000, 12080, 13000};
    for (size_t f = 0; f < sizeof facts / sizeof facts[0]; f++)
        for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++)
            for (unsigned long long flags = 0; flags < 4; flags++)
                check_lookup(facts[f].base, versions[v], flags);

    void *pfn = NULL;
    void *h = libcuda();
    CUdriverProcAddressQueryResult st;
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &pfn, 3020, 0, &st), CUDA_SUCCESS);
    SIM_CHECK(pfn == dlsym(h, "cuMemAlloc_v2"));
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &pfn, 3010, 0, &st), CUDA_SUCCESS);
    SIM_CHECK(pfn == dlsym(h, "cuMemAlloc"));
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAllocAsync", &pfn, 11020, 2, &st), CUDA_SUCCESS);
    SIM_CHECK(pfn == dlsym(h, "cuMemAllocAsync_ptsz"));
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAllocAsync", &pfn, 11020, 1, &st), CUDA_SUCCESS);
    SIM_CHECK(pfn == dlsym(h, "cuMemAllocAsync"));
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &pfn, 3020, 2, &st), CUDA_SUCCESS);
    SIM_CHECK(pfn == dlsym(h, "cuMemAlloc_v2")); /* no _ptsz: the legacy one */
    SIM_CHECK_CU(cuGetProcAddress_v2("cuGetProcAddress", &pfn, 12000, 0, &st), CUDA_SUCCESS);
    SIM_CHECK(pfn == dlsym(h, "cuGetProcAddress_v2"));
    SIM_CHECK_CU(cuGetProcAddress_v2("cuDevicePrimaryCtxReset", &pfn, 7000, 0, &st),
                 CUDA_SUCCESS);
    SIM_CHECK(pfn == dlsym(h, "cuDevicePrimaryCtxReset"));
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemRetainAllocationHandle", &pfn, 10020, 0, &st),
                 CUDA_ERROR_NOT_FOUND);
    SIM_CHECK_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    SIM_CHECK(pfn == NULL);

    /* What it returns works. */
    __typeof__(cuMemAlloc_v2) *alloc = NULL;
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", (void **)&alloc, 12000, 0, NULL),
                 CUDA_SUCCESS);
    sim_test_ctx(0);
    CUdeviceptr p = 0;
    SIM_CHECK_CU(alloc(&p, 4096), CUDA_SUCCESS);
    SIM_CHECK_EQ(p, SIM_TEST_BASE(0));
}
SIM_TEST(versions_and_flags, versions_body, NULL)

static void bad_args_body(void)
{
    void *pfn = (void *)&pfn;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
    SIM_CHECK_CU(cuGetProcAddress_v2("", &pfn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    SIM_CHECK_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    SIM_CHECK(pfn == NULL);
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc_v2", &pfn, 13000, 0, &st),
                 CUDA_ERROR_NOT_FOUND); /* variants are not base names */
    SIM_CHECK_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    SIM_CHECK_CU(cuGetProcAddress_v2("cuLaunchKernel", &pfn, 13000, 0, &st),
                 CUDA_ERROR_NOT_FOUND);
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &pfn, 1000, 0, &st), CUDA_ERROR_NOT_FOUND);
    SIM_CHECK_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &pfn, 13000, 0, NULL), CUDA_SUCCESS);
    st = (CUdriverProcAddressQueryResult)99;
    SIM_CHECK_CU(cuGetProcAddress_v2(NULL, &pfn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", NULL, 13000, 0, &st),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &pfn, 13010, 0, &st),
                 CUDA_ERROR_INVALID_VALUE); /* newer than the driver */
    SIM_CHECK_CU(cuGetProcAddress_v2("cuMemAlloc", &pfn, 13000, 4, &st),
                 CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_EQ(st, 99); /* untouched on invalid arguments */
    SIM_CHECK_CU(cuGetProcAddress(NULL, &pfn, 13000, 0), CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK_CU(cuGetProcAddress("nope", &pfn, 13000, 0), CUDA_ERROR_NOT_FOUND);
}
SIM_TEST(bad_arguments, bad_args_body, NULL)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_tsv_row),
        cmocka_unit_test(versions_and_flags),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests_name("sim_procaddress", tests, NULL, NULL);
}
