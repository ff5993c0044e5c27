/* cudnn_backend.c - the simulated cuDNN's graph ("backend") API: descriptors
 * that keep every attribute set on them and read it back, a heuristic that
 * offers one engine configuration, execution plans whose workspace is
 * SIMCUDA_CUDNN_WORKSPACE bytes (default 0), and an execute that computes
 * nothing.
 *
 * PyTorch's convolutions and its cuDNN attention go through the cuDNN
 * frontend (header-only, compiled into libtorch_cuda.so), which speaks only
 * these six calls: create/destroy a descriptor, set/get an attribute,
 * finalize, execute.  A descriptor is (type, attributes); the frontend asks
 * for a handful of attributes that cuDNN computes rather than stores:
 *   OPERATIONGRAPH_ENGINE_GLOBAL_COUNT   1
 *   ENGINEHEUR_RESULTS                   one engine configuration, whose
 *                                        ENGINECFG_ENGINE is engine 0
 *   EXECUTION_PLAN_WORKSPACE_SIZE        SIMCUDA_CUDNN_WORKSPACE
 * Every other attribute never set reads back as zero elements.  Getting a
 * BACKEND_DESCRIPTOR attribute copies the referenced descriptors into the
 * caller's, as cuDNN does (the caller creates them).
 *
 * Threads: a descriptor is used by one thread at a time, as cuDNN requires;
 * the engine descriptor handed out is immutable after its one-time set-up.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

/* cudnnBackendDescriptorType_t (cudnn_graph.h) */
#define DESC_ENGINE 2
#define DESC_ENGINECFG 3
#define DESC_TYPE_MAX 64 /* cuDNN 9 defines fewer types */

/* cudnnBackendAttributeType_t */
#define T_HANDLE 0
#define T_BOOLEAN 2
#define T_INT64 3
#define T_DOUBLE 5
#define T_VOID_PTR 6
#define T_BACKEND_DESCRIPTOR 15
#define T_CHAR 24
#define T_FRACTION 26
#define T_MAX 64

/* cudnnBackendAttributeName_t: the ones cuDNN computes */
#define A_ENGINEHEUR_RESULTS 202
#define A_ENGINECFG_ENGINE 300
#define A_EXECUTION_PLAN_WORKSPACE_SIZE 402
#define A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT 802
#define A_ENGINE_GLOBAL_INDEX 1301

struct attr {
    int name;
    int type;
    int64_t count;
    unsigned char *data; /* count elements of the type's size */
};

struct sim_dnn_desc {
    uint32_t magic;  /* DESC_MAGIC while alive */
    int type;
    int finalized;
    int nattrs, cap;
    struct attr *attrs;
};

#define DESC_MAGIC 0x53444e4eu /* "SDNN" */

/* Bytes per element of an attribute type: pointers and 64-bit values, the
 * C bool, chars, int64 pairs; every enum is an int. */
static size_t elem_size(int type)
{
    switch (type) {
    case T_HANDLE: case T_INT64: case T_DOUBLE: case T_VOID_PTR: case T_BACKEND_DESCRIPTOR:
        return 8;
    case T_BOOLEAN: case T_CHAR:
        return 1;
    case T_FRACTION:
        return 16;
    default:
        return 4;
    }
}

static struct sim_dnn_desc *live(void *p)
{
    struct sim_dnn_desc *d = p;
    return d != NULL && d->magic == DESC_MAGIC ? d : NULL;
}

static struct attr *find(struct sim_dnn_desc *d, int name)
{
    for (int i = 0; i < d->nattrs; i++)
        if (d->attrs[i].name == name)
            return &d->attrs[i];
    return NULL;
}

/* Stores count elements of type at name (replacing what was there). */
static int store(struct sim_dnn_desc *d, int name, int type, int64_t count, const void *data)
{
    size_t bytes = (size_t)count * elem_size(type);
    unsigned char *copy = NULL;
    if (bytes != 0) {
        copy = malloc(bytes);
        if (copy == NULL)
            return CUDNN_STATUS_ALLOC_FAILED;
        memcpy(copy, data, bytes);
    }
    struct attr *a = find(d, name);
    if (a == NULL) {
        if (d->nattrs == d->cap) {
            int cap = d->cap ? 2 * d->cap : 8;
            struct attr *n = realloc(d->attrs, (size_t)cap * sizeof *n);
            if (n == NULL) {
                free(copy);
                return CUDNN_STATUS_ALLOC_FAILED;
            }
            d->attrs = n;
            d->cap = cap;
        }
        a = &d->attrs[d->nattrs++];
        a->name = name;
    } else {
        free(a->data);
    }
    a->type = type;
    a->count = count;
    a->data = copy;
    return CUDNN_STATUS_SUCCESS;
}

static void clear(struct sim_dnn_desc *d)
{
    for (int i = 0; i < d->nattrs; i++)
        free(d->attrs[i].data);
    free(d->attrs);
    d->attrs = NULL;
    d->nattrs = d->cap = 0;
}

/* dst becomes a copy of src (same type): what a BACKEND_DESCRIPTOR get does. */
static int copy_into(struct sim_dnn_desc *dst, const struct sim_dnn_desc *src)
{
    if (dst == src)
        return CUDNN_STATUS_SUCCESS;
    clear(dst);
    dst->type = src->type;
    dst->finalized = src->finalized;
    for (int i = 0; i < src->nattrs; i++) {
        const struct attr *a = &src->attrs[i];
        int r = store(dst, a->name, a->type, a->count, a->data);
        if (r != CUDNN_STATUS_SUCCESS)
            return r;
    }
    return CUDNN_STATUS_SUCCESS;
}

/* The one engine every heuristic offers: global index 0, no knobs, no
 * numerical or behaviour notes.  Static, never freed: engine configurations
 * the caller keeps refer to it after the heuristic is gone. */
static struct sim_dnn_desc engine0 = {DESC_MAGIC, DESC_ENGINE, 1, 0, 0, NULL};
static struct sim_dnn_desc engcfg0 = {DESC_MAGIC, DESC_ENGINECFG, 1, 0, 0, NULL};
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static int engine_ok;

static void engine_init(void)
{
    int64_t zero = 0;
    struct sim_dnn_desc *e = &engine0;
    engine_ok = store(&engine0, A_ENGINE_GLOBAL_INDEX, T_INT64, 1, &zero) == 0 &&
                store(&engcfg0, A_ENGINECFG_ENGINE, T_BACKEND_DESCRIPTOR, 1, &e) == 0;
}

static uint64_t plan_workspace(void)
{
    static uint64_t bytes = UINT64_MAX;
    return dnn_env_bytes("SIMCUDA_CUDNN_WORKSPACE", &bytes);
}

DNN_API int cudnnBackendCreateDescriptor(int type, void **out)
{
    if (out == NULL || type < 0 || type >= DESC_TYPE_MAX)
        return CUDNN_STATUS_BAD_PARAM;
    struct sim_dnn_desc *d = calloc(1, sizeof *d);
    if (d == NULL)
        return CUDNN_STATUS_ALLOC_FAILED;
    d->magic = DESC_MAGIC;
    d->type = type;
    *out = d;
    return CUDNN_STATUS_SUCCESS;
}

DNN_API int cudnnBackendDestroyDescriptor(void *p)
{
    struct sim_dnn_desc *d = live(p);
    if (d == NULL || d == &engine0 || d == &engcfg0)
        return CUDNN_STATUS_BAD_PARAM;
    clear(d);
    d->magic = 0;
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

DNN_API int cudnnBackendSetAttribute(void *p, int name, int type, int64_t count,
                                     const void *elements)
{
    struct sim_dnn_desc *d = live(p);
    if (d == NULL || type < 0 || type >= T_MAX || count < 0 || (count > 0 && elements == NULL))
        return CUDNN_STATUS_BAD_PARAM;
    if (d->finalized)
        return CUDNN_STATUS_NOT_SUPPORTED; /* cuDNN: attributes are frozen by finalize */
    if (type == T_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < count; i++)
            if (live(((void *const *)elements)[i]) == NULL)
                return CUDNN_STATUS_BAD_PARAM;
    return store(d, name, type, count, elements);
}

DNN_API int cudnnBackendFinalize(void *p)
{
    struct sim_dnn_desc *d = live(p);
    if (d == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    d->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* Hands out n elements of (type, data) as cuDNN would: a count, and the
 * elements that fit in the caller's array (descriptors copied into theirs). */
static int give(int type, int want_type, int64_t n, const void *data, int64_t requested,
                int64_t *count, void *out)
{
    if (type != want_type)
        return CUDNN_STATUS_BAD_PARAM;
    if (count != NULL)
        *count = n;
    int64_t k = n < requested ? n : requested;
    if (type == T_BACKEND_DESCRIPTOR) {
        for (int64_t i = 0; i < k; i++) {
            struct sim_dnn_desc *dst = live(((void **)out)[i]);
            const struct sim_dnn_desc *src = ((struct sim_dnn_desc *const *)data)[i];
            if (dst == NULL)
                return CUDNN_STATUS_BAD_PARAM;
            int r = copy_into(dst, src);
            if (r != CUDNN_STATUS_SUCCESS)
                return r;
        }
    } else if (k > 0) {
        memcpy(out, data, (size_t)k * elem_size(type));
    }
    return CUDNN_STATUS_SUCCESS;
}

DNN_API int cudnnBackendGetAttribute(void *p, int name, int type, int64_t requested,
                                     int64_t *count, void *out)
{
    struct sim_dnn_desc *d = live(p);
    if (d == NULL || type < 0 || type >= T_MAX || requested < 0)
        return CUDNN_STATUS_BAD_PARAM;
    if (out == NULL)
        requested = 0; /* the frontend asks for counts this way too */
    struct attr *a = find(d, name);
    if (a != NULL)
        return give(a->type, type, a->count, a->data, requested, count, out);
    pthread_once(&engine_once, engine_init);
    if (!engine_ok)
        return CUDNN_STATUS_ALLOC_FAILED;
    int64_t one = 1;
    if (name == A_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT)
        return give(T_INT64, type, 1, &one, requested, count, out);
    if (name == A_ENGINEHEUR_RESULTS) {
        const struct sim_dnn_desc *cfg = &engcfg0;
        return give(T_BACKEND_DESCRIPTOR, type, 1, &cfg, requested, count, out);
    }
    if (name == A_EXECUTION_PLAN_WORKSPACE_SIZE) {
        int64_t ws = (int64_t)plan_workspace();
        return give(T_INT64, type, 1, &ws, requested, count, out);
    }
    /* never set, not computed: no elements (values zeroed, descriptors left) */
    if (count != NULL)
        *count = 0;
    if (requested > 0 && type != T_BACKEND_DESCRIPTOR)
        memset(out, 0, (size_t)requested * elem_size(type));
    return CUDNN_STATUS_SUCCESS;
}

DNN_API int cudnnBackendExecute(void *handle, void *plan, void *variant_pack)
{
    if (handle == NULL || live(plan) == NULL || live(variant_pack) == NULL)
        return CUDNN_STATUS_BAD_PARAM;
    if (!live(plan)->finalized || !live(variant_pack)->finalized)
        return CUDNN_STATUS_NOT_INITIALIZED;
    return CUDNN_STATUS_SUCCESS;
}
