/* test_sim_blas.c - the stand-in cuBLAS and cuBLASLt (src/simgpu/blas):
 * handles and descriptors keep what was set on them and read it back, the
 * heuristic offers exactly one algorithm asking for no workspace, kernels
 * succeed without touching memory, and bad handles are refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* The stand-ins' ABI (NVIDIA's cublas_api.h / cublasLt.h, handles opaque). */
int cublasCreate_v2(void **handle);
int cublasDestroy_v2(void *handle);
int cublasSetMathMode(void *handle, int mode);
int cublasGetMathMode(void *handle, int *mode);
int cublasSetPointerMode_v2(void *handle, int mode);
int cublasGetPointerMode_v2(void *handle, int *mode);
int cublasSetWorkspace_v2(void *handle, void *ws, size_t bytes);
int cublasSetSmCountTarget(void *handle, int count);
int cublasSgemm_v2(void *handle, int ta, int tb, int m, int n, int k, const float *alpha,
                   const float *a, int lda, const float *b, int ldb, const float *beta, float *c,
                   int ldc);
size_t cublasLtGetVersion(void);
int cublasLtMatmulDescCreate(void **desc, int compute, int scale);
int cublasLtMatmulDescDestroy(void *desc);
int cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf, size_t size);
int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld);
int cublasLtMatrixLayoutDestroy(void *l);
int cublasLtMatmulPreferenceCreate(void **p);
int cublasLtMatmulPreferenceDestroy(void *p);
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *buf, size_t size);
struct algo { uint64_t data[8]; };
struct heuristic { struct algo algo; size_t workspace; int state; float waves; int reserved[4]; };
int cublasLtMatmulAlgoGetHeuristic(void *h, void *op, void *a, void *b, void *c, void *d,
                                   void *pref, int requested, struct heuristic *out,
                                   int *returned);
int cublasLtMatmulAlgoInit(void *h, int compute, int scale, int at, int bt, int ct, int dt,
                           int id, struct algo *algo);
int cublasLtMatmulAlgoConfigSetAttribute(struct algo *algo, int attr, const void *buf,
                                         size_t size);
int cublasLtMatmulAlgoConfigGetAttribute(const struct algo *algo, int attr, void *buf,
                                         size_t size, size_t *written);
int cublasLtMatmul(void *h, void *op, const void *alpha, const void *a, void *ad, const void *b,
                   void *bd, const void *beta, const void *c, void *cd, void *d, void *dd,
                   const struct algo *algo, void *ws, size_t wsize, void *stream);

#define OK 0
#define NOT_INITIALIZED 1
#define INVALID_VALUE 7

static void handle_keeps_settings(void **state)
{
    (void)state;
    void *h = NULL;
    int v = -1;
    assert_int_equal(cublasCreate_v2(&h), OK);
    assert_non_null(h);
    assert_int_equal(cublasGetMathMode(h, &v), OK);
    assert_int_equal(v, 0); /* CUBLAS_DEFAULT_MATH */
    assert_int_equal(cublasSetMathMode(h, 16), OK); /* CUBLAS_MATH_DISALLOW_REDUCED_PRECISION... */
    assert_int_equal(cublasGetMathMode(h, &v), OK);
    assert_int_equal(v, 16);
    assert_int_equal(cublasSetPointerMode_v2(h, 1), OK);
    assert_int_equal(cublasGetPointerMode_v2(h, &v), OK);
    assert_int_equal(v, 1);
    assert_int_equal(cublasGetMathMode(h, NULL), INVALID_VALUE);
    assert_int_equal(cublasSetWorkspace_v2(h, (void *)(uintptr_t)0x200000000100, 1 << 20), OK);
    assert_int_equal(cublasSetWorkspace_v2(h, (void *)(uintptr_t)0x200000000101, 1 << 20),
                     INVALID_VALUE); /* not 256-byte aligned */
    assert_int_equal(cublasSetSmCountTarget(h, -1), INVALID_VALUE);
    /* a kernel: succeeds, computes nothing (the output stays as it was) */
    float c = 42.0f, one = 1.0f;
    assert_int_equal(cublasSgemm_v2(h, 0, 0, 1, 1, 1, &one, &one, 1, &one, 1, &one, &c, 1), OK);
    assert_true(c == 42.0f);
    assert_int_equal(cublasDestroy_v2(h), OK);
    assert_int_equal(cublasGetMathMode(NULL, &v), NOT_INITIALIZED);
}

static void lt_heuristic_offers_one_algorithm(void **state)
{
    (void)state;
    void *h = NULL, *op = NULL, *a = NULL, *pref = NULL;
    assert_true(cublasLtGetVersion() >= 130000);
    assert_int_equal(cublasCreate_v2(&h), OK);
    assert_int_equal(cublasLtMatmulDescCreate(&op, 68, 0), OK); /* COMPUTE_32F, CUDA_R_32F */
    int epilogue = 4; /* CUBLASLT_EPILOGUE_BIAS */
    assert_int_equal(cublasLtMatmulDescSetAttribute(op, 7, &epilogue, sizeof epilogue), OK);
    char big[65] = {0};
    assert_int_equal(cublasLtMatmulDescSetAttribute(op, 7, big, sizeof big), INVALID_VALUE);
    assert_int_equal(cublasLtMatrixLayoutCreate(&a, 0, 64, 64, 64), OK);
    assert_int_equal(cublasLtMatmulPreferenceCreate(&pref), OK);
    uint64_t max_ws = 1 << 20;
    assert_int_equal(cublasLtMatmulPreferenceSetAttribute(pref, 1, &max_ws, sizeof max_ws), OK);
    struct heuristic r[4];
    memset(r, 0xff, sizeof r);
    int n = -1;
    assert_int_equal(cublasLtMatmulAlgoGetHeuristic(h, op, a, a, a, a, pref, 4, r, &n), OK);
    assert_int_equal(n, 1);
    assert_int_equal(r[0].state, OK);
    assert_int_equal(r[0].workspace, 0);
    assert_int_equal(cublasLtMatmulAlgoGetHeuristic(h, op, a, a, a, a, NULL, 4, r, &n),
                     INVALID_VALUE);
    assert_int_equal(cublasLtMatmul(h, op, NULL, NULL, a, NULL, a, NULL, NULL, a, NULL, a,
                                    &r[0].algo, NULL, 0, NULL), OK);
    assert_int_equal(cublasLtMatmul(h, NULL, NULL, NULL, a, NULL, a, NULL, NULL, a, NULL, a,
                                    &r[0].algo, NULL, 0, NULL), INVALID_VALUE);
    assert_int_equal(cublasLtMatmulPreferenceDestroy(pref), OK);
    assert_int_equal(cublasLtMatrixLayoutDestroy(a), OK);
    assert_int_equal(cublasLtMatmulDescDestroy(op), OK);
    assert_int_equal(cublasDestroy_v2(h), OK);
}

static void lt_algo_config_round_trips(void **state)
{
    (void)state;
    void *h = NULL;
    struct algo algo;
    int32_t id = -1, tile = 17;
    uint16_t inner = 5, back = 0;
    size_t written = 0;
    assert_int_equal(cublasCreate_v2(&h), OK);
    assert_int_equal(cublasLtMatmulAlgoInit(h, 68, 0, 0, 0, 0, 0, 21, &algo), OK);
    assert_int_equal(cublasLtMatmulAlgoConfigGetAttribute(&algo, 0, &id, sizeof id, &written), OK);
    assert_int_equal(id, 21);
    assert_int_equal(written, 4);
    assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(&algo, 1, &tile, sizeof tile), OK);
    assert_int_equal(cublasLtMatmulAlgoConfigGetAttribute(&algo, 1, &id, sizeof id, NULL), OK);
    assert_int_equal(id, 17);
    assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(&algo, 7, &inner, sizeof inner), OK);
    assert_int_equal(cublasLtMatmulAlgoConfigGetAttribute(&algo, 7, NULL, 0, &written), OK);
    assert_int_equal(written, 2); /* the size asked for */
    assert_int_equal(cublasLtMatmulAlgoConfigGetAttribute(&algo, 7, &back, sizeof back, NULL), OK);
    assert_int_equal(back, 5);
    assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(&algo, 1, &inner, sizeof inner),
                     INVALID_VALUE); /* wrong size for a 32-bit attribute */
    assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(&algo, 99, &tile, sizeof tile),
                     INVALID_VALUE);
    assert_int_equal(cublasDestroy_v2(h), OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handle_keeps_settings),
        cmocka_unit_test(lt_heuristic_offers_one_algorithm),
        cmocka_unit_test(lt_algo_config_round_trips),
    };
    return cmocka_run_group_tests_name("sim_blas", tests, NULL, NULL);
}
