/* cublasLt.c - the simulated GPU's libcublasLt.so.13: matmul descriptors,
 * matrix layouts and preferences that keep the attributes set on them, a
 * heuristic that offers one algorithm, and a matmul that computes nothing.
 *
 * PyTorch sends nn.Linear's forward (bias epilogue) here, with a handle that
 * is its cuBLAS handle cast (cublasLtCreate is not among the wheel's
 * imports), and a workspace from its caching allocator; the heuristic asks
 * for no workspace of its own, so what PyTorch allocates is all there is.
 * The algorithm struct (cublasLtMatmulAlgo_t, eight words) is the caller's:
 * cublasLtMatmulAlgoInit writes the algorithm id into word 0 and
 * AlgoConfigSetAttribute attribute k into word k, where GetAttribute reads
 * it back.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"

/* cuBLAS 13.4.1 (the PyPI wheel nvidia-cublas 13.4.1.3): CUBLAS_VERSION is
 * major * 10000 + minor * 100 + patch.  PyTorch gates features on it. */
#define SIM_CUBLASLT_VERSION 130401

#define ATTR_MAX 32       /* attributes per object: cuBLASLt defines < 32 per kind */
#define ATTR_BYTES 64     /* the largest attribute value is a pointer or an int64 */

struct attr_store {
    int n;
    struct {
        int id;
        size_t size;
        unsigned char value[ATTR_BYTES];
    } a[ATTR_MAX];
};

/* A matmul descriptor, matrix layout or preference: what was set on it
 * (nothing reads its creation arguments back). */
struct sim_lt_object {
    uint32_t magic;       /* LT_MAGIC while alive */
    struct attr_store attrs;
};

#define LT_MAGIC 0x534c5444u /* "SLTD" */

/* cublasLtMatmulAlgo_t and cublasLtMatmulHeuristicResult_t (cublasLt.h). */
struct lt_algo {
    uint64_t data[8];
};
struct lt_heuristic {
    struct lt_algo algo;
    size_t workspace_size;
    int state;
    float waves_count;
    int reserved[4];
};
_Static_assert(sizeof(struct lt_heuristic) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

static struct sim_lt_object *live(void *p)
{
    struct sim_lt_object *o = p;
    return o != NULL && o->magic == LT_MAGIC ? o : NULL;
}

static int create(void **out)
{
    if (out == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct sim_lt_object *o = calloc(1, sizeof *o);
    if (o == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    o->magic = LT_MAGIC;
    *out = o;
    return CUBLAS_STATUS_SUCCESS;
}

static int destroy(void *p)
{
    struct sim_lt_object *o = live(p);
    if (o == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    o->magic = 0;
    free(o);
    return CUBLAS_STATUS_SUCCESS;
}

/* Stores (or replaces) attribute id of o. */
static int set_attr(void *p, int id, const void *buf, size_t size)
{
    struct sim_lt_object *o = live(p);
    if (o == NULL || (buf == NULL && size != 0) || size > ATTR_BYTES)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct attr_store *s = &o->attrs;
    int i = 0;
    while (i < s->n && s->a[i].id != id)
        i++;
    if (i == s->n) {
        if (s->n == ATTR_MAX)
            return CUBLAS_STATUS_INVALID_VALUE;
        s->n++;
    }
    s->a[i].id = id;
    s->a[i].size = size;
    if (size != 0)
        memcpy(s->a[i].value, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

/* Every object kind is destroyed and given attributes alike. */
#define LT_OBJECT(Kind)                                                              \
    BLAS_API int cublasLt##Kind##Destroy(void *o) { return destroy(o); }             \
    BLAS_API int cublasLt##Kind##SetAttribute(void *o, int attr, const void *buf,    \
                                              size_t size)                           \
    {                                                                                \
        return set_attr(o, attr, buf, size);                                         \
    }
LT_OBJECT(MatmulDesc)
LT_OBJECT(MatrixLayout)
LT_OBJECT(MatmulPreference)

BLAS_API size_t cublasLtGetVersion(void)
{
    return SIM_CUBLASLT_VERSION;
}

BLAS_API int cublasLtMatmulDescCreate(void **desc, int compute_type, int scale_type)
{
    (void)compute_type, (void)scale_type;
    return create(desc);
}

BLAS_API int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols,
                                        int64_t ld)
{
    (void)type, (void)rows, (void)cols, (void)ld;
    return create(layout);
}

BLAS_API int cublasLtMatmulPreferenceCreate(void **pref)
{
    return create(pref);
}

BLAS_API int cublasLtMatmulAlgoInit(void *handle, int compute_type, int scale_type, int a_type,
                                    int b_type, int c_type, int d_type, int algo_id,
                                    struct lt_algo *algo)
{
    (void)compute_type, (void)scale_type, (void)a_type, (void)b_type, (void)c_type,
        (void)d_type;
    if (handle == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (algo == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(algo, 0, sizeof *algo);
    algo->data[0] = (uint64_t)(uint32_t)algo_id;
    return CUBLAS_STATUS_SUCCESS;
}

/* The size of each cublasLtMatmulAlgoConfigAttributes_t value (cublasLt.h):
 * ids 0-6 are int32/uint32, 7 and 8 (inner and cluster shape) uint16. */
static size_t algo_attr_size(int attr)
{
    if (attr >= 0 && attr <= 6)
        return 4;
    if (attr == 7 || attr == 8)
        return 2;
    return 0;
}

BLAS_API int cublasLtMatmulAlgoConfigSetAttribute(struct lt_algo *algo, int attr,
                                                  const void *buf, size_t size)
{
    size_t want = algo_attr_size(attr);
    if (algo == NULL || buf == NULL || want == 0 || size != want)
        return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t v = 0;
    memcpy(&v, buf, size); /* little-endian: the low bytes of the word */
    algo->data[attr] = v;
    return CUBLAS_STATUS_SUCCESS;
}

BLAS_API int cublasLtMatmulAlgoConfigGetAttribute(const struct lt_algo *algo, int attr,
                                                  void *buf, size_t size, size_t *written)
{
    size_t want = algo_attr_size(attr);
    if (algo == NULL || want == 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (size == 0 && written != NULL) { /* the caller asks how large it is */
        *written = want;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (buf == NULL || size < want)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, &algo->data[attr], want);
    if (written != NULL)
        *written = want;
    return CUBLAS_STATUS_SUCCESS;
}

/* State CUBLAS_STATUS_SUCCESS (0), and no workspace beyond what PyTorch
 * hands in. */
static void one_result(struct lt_heuristic *r, const struct lt_algo *algo)
{
    memset(r, 0, sizeof *r);
    r->algo = *algo;
    r->waves_count = 1.0f;
}

BLAS_API int cublasLtMatmulAlgoCheck(void *handle, void *op, void *a, void *b, void *c, void *d,
                                     const struct lt_algo *algo, struct lt_heuristic *result)
{
    if (handle == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (live(op) == NULL || live(a) == NULL || live(b) == NULL || live(c) == NULL ||
        live(d) == NULL || algo == NULL || result == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    one_result(result, algo);
    return CUBLAS_STATUS_SUCCESS;
}

BLAS_API int cublasLtMatmulAlgoGetHeuristic(void *handle, void *op, void *a, void *b, void *c,
                                            void *d, void *pref, int requested,
                                            struct lt_heuristic *results, int *returned)
{
    if (handle == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (live(op) == NULL || live(a) == NULL || live(b) == NULL || live(c) == NULL ||
        live(d) == NULL || live(pref) == NULL || requested <= 0 || results == NULL ||
        returned == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct lt_algo algo = {{0}};
    one_result(&results[0], &algo);
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

BLAS_API int cublasLtMatmul(void *handle, void *op, const void *alpha, const void *a,
                            void *adesc, const void *b, void *bdesc, const void *beta,
                            const void *c, void *cdesc, void *d, void *ddesc,
                            const struct lt_algo *algo, void *workspace, size_t workspace_size,
                            void *stream)
{
    (void)alpha, (void)a, (void)b, (void)beta, (void)c, (void)d, (void)algo, (void)workspace,
        (void)workspace_size, (void)stream;
    if (handle == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (live(op) == NULL || live(adesc) == NULL || live(bdesc) == NULL || live(cdesc) == NULL ||
        live(ddesc) == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}
