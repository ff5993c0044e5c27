/* cudnn.c - the simulated GPU's libcudnn.so.9, legacy half: handles,
 * versions, error strings, tensor and filter descriptors that read back what
 * was set, workspace and reserve-space sizes, and one algorithm per search.
 * The graph API PyTorch's convolutions use is in cudnn_backend.c; every
 * other imported symbol (the kernels: BatchNorm, pooling, ...) is a
 * generated no-op returning CUDNN_STATUS_SUCCESS (dnn_noops.c from
 * cudnn.syms).
 *
 * Sizes: PyTorch allocates what cuDNN asks for from its caching allocator,
 * so on a real card its figures include those buffers.  BatchNorm's
 * workspace is SIMCUDA_CUDNN_BN_WORKSPACE and its reserve space (kept from
 * forward to backward) SIMCUDA_CUDNN_BN_RESERVE, the graph API's plan
 * workspace SIMCUDA_CUDNN_WORKSPACE; each defaults to 0, as no published
 * figure says what a real engine asks for (docs/simgpu.md, fidelity
 * limits).  The legacy convolution workspaces and the dropout state are 0.  RNNs and CTC loss are not
 * simulated: their size queries answer CUDNN_STATUS_NOT_SUPPORTED, which
 * PyTorch reports as an error (never a crash on garbage sizes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"
#include "sim_common.h"

/* cuDNN 9.26.0 (the PyPI wheel nvidia-cudnn-cu13 9.26.0.51): CUDNN_VERSION is
 * major * 10000 + minor * 100 + patch; PyTorch checks the major at start-up. */
#define SIM_CUDNN_MAJOR 9
#define SIM_CUDNN_MINOR 26
#define SIM_CUDNN_PATCH 0
#define SIM_CUDART_VERSION 13020 /* the runtime the wheel ships, 13.2 */

#define MAX_DIMS 8 /* CUDNN_DIM_MAX */

struct sim_cudnn_handle {
    uint32_t magic;
    void *stream;
};

/* A legacy descriptor (tensor, filter, convolution, activation, ...): what
 * the Set call gave, for the Get call. */
struct sim_cudnn_desc {
    uint32_t magic;
    int data_type, format, nb_dims;
    int dims[MAX_DIMS], strides[MAX_DIMS];
};

#define HANDLE_MAGIC 0x53434448u /* "SCDH" */
#define LDESC_MAGIC 0x5343444cu  /* "SCDL" */

static struct sim_cudnn_handle *handle_of(void *h)
{
    struct sim_cudnn_handle *s = h;
    return s != NULL && s->magic == HANDLE_MAGIC ? s : NULL;
}

static struct sim_cudnn_desc *desc_of(void *d)
{
    struct sim_cudnn_desc *s = d;
    return s != NULL && s->magic == LDESC_MAGIC ? s : NULL;
}

DNN_API size_t cudnnGetVersion(void)
{
    return SIM_CUDNN_MAJOR * 10000 + SIM_CUDNN_MINOR * 100 + SIM_CUDNN_PATCH;
}

DNN_API size_t cudnnGetCudartVersion(void)
{
    return SIM_CUDART_VERSION;
}

/* libraryPropertyType: MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2 */
DNN_API int cudnnGetProperty(int type, int *value)
{
    static const int v[3] = {SIM_CUDNN_MAJOR, SIM_CUDNN_MINOR, SIM_CUDNN_PATCH};
    if (value == NULL || type < 0 || type > 2)
        return CUDNN_STATUS_BAD_PARAM;
    *value = v[type];
    return CUDNN_STATUS_SUCCESS;
}

DNN_API const char *cudnnGetErrorString(int status)
{
    switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
        return "CUDNN_STATUS_NOT_SUPPORTED (not simulated: see docs/simgpu.md)";
    case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

DNN_API void cudnnGetLastErrorString(char *message, size_t max)
{
    if (message != NULL && max > 0)
        message[0] = '\0';
}

DNN_API int cudnnCreate(void **handle)
{
    if (handle == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    struct sim_cudnn_handle *h = calloc(1, sizeof *h);
    if (h == NULL)
        return CUDNN_STATUS_ALLOC_FAILED;
    h->magic = HANDLE_MAGIC;
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

DNN_API int cudnnSetStream(void *handle, void *stream)
{
    struct sim_cudnn_handle *h = handle_of(handle);
    if (h == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    h->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

DNN_API int cudnnGetStream(void *handle, void **stream)
{
    struct sim_cudnn_handle *h = handle_of(handle);
    if (h == NULL || stream == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    *stream = h->stream;
    return CUDNN_STATUS_SUCCESS;
}

static int create_desc(void **out)
{
    if (out == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    struct sim_cudnn_desc *d = calloc(1, sizeof *d);
    if (d == NULL)
        return CUDNN_STATUS_ALLOC_FAILED;
    d->magic = LDESC_MAGIC;
    *out = d;
    return CUDNN_STATUS_SUCCESS;
}

static int destroy_desc(void *p)
{
    struct sim_cudnn_desc *d = desc_of(p);
    if (p == NULL)
        return CUDNN_STATUS_SUCCESS; /* cuDNN accepts NULL */
    if (d == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    d->magic = 0;
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

#define DESCRIPTOR_KIND(Kind)                                                \
    DNN_API int cudnnCreate##Kind##Descriptor(void **d) { return create_desc(d); } \
    DNN_API int cudnnDestroy##Kind##Descriptor(void *d) { return destroy_desc(d); }
DESCRIPTOR_KIND(Tensor)
DESCRIPTOR_KIND(Filter)
DESCRIPTOR_KIND(Convolution)
DESCRIPTOR_KIND(Activation)
DESCRIPTOR_KIND(Dropout)
DESCRIPTOR_KIND(RNN)
DESCRIPTOR_KIND(RNNData)
DESCRIPTOR_KIND(CTCLoss)
DESCRIPTOR_KIND(SpatialTransformer)
/* cuDNN 9 has cudnnCreatePoolingDescriptor but PyTorch never destroys one */
DNN_API int cudnnCreatePoolingDescriptor(void **d)
{
    return create_desc(d);
}

static int set_nd(void *p, int data_type, int format, int nb, const int *dims,
                  const int *strides)
{
    struct sim_cudnn_desc *d = desc_of(p);
    if (d == NULL || nb < 1 || nb > MAX_DIMS || dims == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    for (int i = 0; i < nb; i++)
        if (dims[i] <= 0 || (strides != NULL && strides[i] <= 0))
            return CUDNN_STATUS_BAD_PARAM;
    d->data_type = data_type;
    d->format = format;
    d->nb_dims = nb;
    memcpy(d->dims, dims, (size_t)nb * sizeof *dims);
    if (strides != NULL)
        memcpy(d->strides, strides, (size_t)nb * sizeof *strides);
    return CUDNN_STATUS_SUCCESS;
}

static int get_nd(void *p, int requested, int *data_type, int *format, int *nb, int *dims,
                  int *strides)
{
    struct sim_cudnn_desc *d = desc_of(p);
    if (d == NULL || requested < 0 || (requested > 0 && dims == NULL))
        return CUDNN_STATUS_BAD_PARAM;
    if (data_type != NULL)
        *data_type = d->data_type;
    if (format != NULL)
        *format = d->format;
    if (nb != NULL)
        *nb = d->nb_dims;
    int k = requested < d->nb_dims ? requested : d->nb_dims;
    for (int i = 0; i < k; i++) {
        dims[i] = d->dims[i];
        if (strides != NULL)
            strides[i] = d->strides[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

DNN_API int cudnnSetTensorNdDescriptor(void *d, int data_type, int nb, const int *dims,
                                       const int *strides)
{
    if (strides == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    return set_nd(d, data_type, 0, nb, dims, strides);
}

DNN_API int cudnnGetTensorNdDescriptor(void *d, int requested, int *data_type, int *nb,
                                       int *dims, int *strides)
{
    return get_nd(d, requested, data_type, NULL, nb, dims, strides);
}

DNN_API int cudnnSetFilterNdDescriptor(void *d, int data_type, int format, int nb,
                                       const int *dims)
{
    return set_nd(d, data_type, format, nb, dims, NULL);
}

DNN_API int cudnnGetFilterNdDescriptor(void *d, int requested, int *data_type, int *format,
                                       int *nb, int *dims)
{
    return get_nd(d, requested, data_type, format, nb, dims, NULL);
}

/* ---- sizes PyTorch allocates from its caching allocator ---- */

/* *size := bytes, for a live handle. */
static int answer_size(void *handle, size_t *size, uint64_t bytes)
{
    if (handle_of(handle) == NULL || size == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    *size = (size_t)bytes;
    return CUDNN_STATUS_SUCCESS;
}

static int zero_size(void *handle, size_t *size)
{
    return answer_size(handle, size, 0);
}

uint64_t dnn_env_bytes(const char *name, uint64_t *cache)
{
    if (*cache == UINT64_MAX)
        *cache = sim_common_env_size("simcudnn", name, 0, 0, UINT64_C(1) << 40);
    return *cache;
}

static uint64_t bn_workspace(void)
{
    static uint64_t bytes = UINT64_MAX;
    return dnn_env_bytes("SIMCUDA_CUDNN_BN_WORKSPACE", &bytes);
}

static uint64_t bn_reserve(void)
{
    static uint64_t bytes = UINT64_MAX;
    return dnn_env_bytes("SIMCUDA_CUDNN_BN_RESERVE", &bytes);
}

DNN_API int cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
    void *h, int mode, int ops, void *x, void *z, void *y, void *bn, void *act, size_t *size)
{
    (void)mode, (void)ops, (void)x, (void)z, (void)y, (void)bn, (void)act;
    return answer_size(h, size, bn_workspace());
}

DNN_API int cudnnGetBatchNormalizationBackwardExWorkspaceSize(
    void *h, int mode, int ops, void *x, void *y, void *dy, void *dz, void *dx, void *dbn,
    void *act, size_t *size)
{
    (void)mode, (void)ops, (void)x, (void)y, (void)dy, (void)dz, (void)dx, (void)dbn,
        (void)act;
    return answer_size(h, size, bn_workspace());
}

DNN_API int cudnnGetBatchNormalizationTrainingExReserveSpaceSize(void *h, int mode, int ops,
                                                                 void *act, void *x,
                                                                 size_t *size)
{
    (void)mode, (void)ops, (void)act, (void)x;
    return answer_size(h, size, bn_reserve());
}

#define CONV_WORKSPACE(Name)                                                             \
    DNN_API int cudnnGetConvolution##Name##WorkspaceSize(void *h, void *a, void *b,      \
                                                         void *c, void *d, int algo,     \
                                                         size_t *size)                   \
    {                                                                                    \
        (void)a, (void)b, (void)c, (void)d, (void)algo;                                  \
        return zero_size(h, size);                                                       \
    }
CONV_WORKSPACE(Forward)
CONV_WORKSPACE(BackwardData)
CONV_WORKSPACE(BackwardFilter)

DNN_API int cudnnDropoutGetStatesSize(void *h, size_t *size)
{
    return zero_size(h, size);
}

/* cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: the same layout. */
struct algo_perf {
    int algo;
    int status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
};

static int one_algorithm(void *h, int requested, int *returned, struct algo_perf *perf)
{
    if (handle_of(h) == NULL || requested < 1 || returned == NULL || perf == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    /* algorithm 0, CUDNN_STATUS_SUCCESS, no time, no memory */
    memset(&perf[0], 0, sizeof perf[0]);
    perf[0].determinism = 1; /* CUDNN_DETERMINISTIC */
    *returned = 1;
    return CUDNN_STATUS_SUCCESS;
}

#define CONV_ALGORITHMS(Name)                                                            \
    DNN_API int cudnnGetConvolution##Name##Algorithm_v7(void *h, void *a, void *b, void *c, \
                                                        void *d, int requested,          \
                                                        int *returned,                   \
                                                        struct algo_perf *perf)          \
    {                                                                                    \
        (void)a, (void)b, (void)c, (void)d;                                              \
        return one_algorithm(h, requested, returned, perf);                              \
    }                                                                                    \
    DNN_API int cudnnFindConvolution##Name##AlgorithmEx(                                 \
        void *h, void *a, const void *ap, void *b, const void *bp, void *c, void *d,     \
        void *dp, int requested, int *returned, struct algo_perf *perf, void *ws,        \
        size_t wsize)                                                                    \
    {                                                                                    \
        (void)a, (void)ap, (void)b, (void)bp, (void)c, (void)d, (void)dp, (void)ws,       \
            (void)wsize;                                                                 \
        return one_algorithm(h, requested, returned, perf);                              \
    }
CONV_ALGORITHMS(Forward)
CONV_ALGORITHMS(BackwardData)
CONV_ALGORITHMS(BackwardFilter)

/* ---- not simulated: an error PyTorch reports, not garbage sizes ---- */

DNN_API int cudnnGetRNNWeightSpaceSize(void) { return CUDNN_STATUS_NOT_SUPPORTED; }
DNN_API int cudnnGetRNNTempSpaceSizes(void) { return CUDNN_STATUS_NOT_SUPPORTED; }
DNN_API int cudnnGetRNNWeightParams(void) { return CUDNN_STATUS_NOT_SUPPORTED; }
DNN_API int cudnnGetCTCLossWorkspaceSize(void) { return CUDNN_STATUS_NOT_SUPPORTED; }
DNN_API int cudnnGetCTCLossWorkspaceSize_v8(void) { return CUDNN_STATUS_NOT_SUPPORTED; }
