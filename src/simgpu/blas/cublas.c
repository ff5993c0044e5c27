/* cublas.c - the simulated GPU's libcublas.so.13: handles that keep what was
 * set on them, and kernels that compute nothing.
 *
 * PyTorch's libtorch_cuda.so links NVIDIA's cuBLAS directly, whose own static
 * runtime cannot start on the simulated driver; scripts/simgpu preloads this
 * library under the same soname and version node instead (the loader reuses a
 * loaded soname before it searches the DT_RPATH).  Every symbol the PyPI
 * wheel imports is defined: the ones below by hand, the rest (the BLAS and
 * LAPACK-like kernels) by blas_noops.c, generated from cublas.syms, which
 * check the handle as NVIDIA's do (CUBLAS_STATUS_NOT_INITIALIZED for NULL or
 * a destroyed one), else return CUBLAS_STATUS_SUCCESS and touch nothing -
 * device memory holds no data.
 *
 * Workspace: PyTorch hands cuBLAS a workspace from its caching allocator on
 * every matmul (cublasSetWorkspace_v2; its size by compute capability, see
 * docs/simgpu.md), so the caching allocator's figures are PyTorch's own
 * without anything here.  A handle allocates no device memory: NVIDIA's
 * cublasCreate takes a small amount outside any allocator (a fidelity limit
 * listed in docs/simgpu.md).
 *
 * Threads: a handle belongs to one thread at a time, as cuBLAS requires.
 */
#include <stdint.h>
#include <stdlib.h>

#include "blas.h"

/* cublasMath_t, cublasPointerMode_t: what cublasCreate sets. */
#define CUBLAS_DEFAULT_MATH 0
#define CUBLAS_POINTER_MODE_HOST 0

struct sim_cublas_handle {
    uint32_t magic;          /* BLAS_HANDLE_MAGIC while alive */
    void *stream;            /* cublasSetStream_v2 (NULL: the default stream) */
    void *workspace;         /* cublasSetWorkspace_v2 */
    size_t workspace_bytes;
    int math_mode;           /* cublasSetMathMode */
    int pointer_mode;        /* cublasSetPointerMode_v2 */
    int sm_count_target;     /* cublasSetSmCountTarget (0: all SMs) */
};

#define BLAS_HANDLE_MAGIC 0x53424c41u /* "SBLA" */

static struct sim_cublas_handle *live(void *h)
{
    struct sim_cublas_handle *s = h;
    return s != NULL && s->magic == BLAS_HANDLE_MAGIC ? s : NULL;
}

/* What the generated entry points (the kernels, noops.awk) return: NVIDIA's
 * status for a handle that is not a live one, else success. */
__attribute__((visibility("hidden"))) int sim_cublas_handle_status(void *handle);
int sim_cublas_handle_status(void *handle)
{
    return live(handle) != NULL ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

BLAS_API int cublasCreate_v2(void **handle)
{
    if (handle == NULL)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct sim_cublas_handle *s = calloc(1, sizeof *s);
    if (s == NULL)
        return CUBLAS_STATUS_ALLOC_FAILED;
    s->magic = BLAS_HANDLE_MAGIC;
    s->math_mode = CUBLAS_DEFAULT_MATH;
    s->pointer_mode = CUBLAS_POINTER_MODE_HOST;
    *handle = s;
    return CUBLAS_STATUS_SUCCESS;
}

BLAS_API int cublasDestroy_v2(void *handle)
{
    struct sim_cublas_handle *s = live(handle);
    if (s == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    s->magic = 0;
    free(s);
    return CUBLAS_STATUS_SUCCESS;
}

BLAS_API int cublasSetWorkspace_v2(void *handle, void *workspace, size_t bytes)
{
    struct sim_cublas_handle *s = live(handle);
    if (s == NULL)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    /* NVIDIA's check: the workspace must be 256-byte aligned. */
    if (workspace != NULL && (uintptr_t)workspace % 256 != 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    s->workspace = workspace;
    s->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

/* The settings a handle keeps as they are given: a setter that refuses a
 * value where `refused` holds (0: none), a getter that reads it back. */
#define SETTER(fn, type, field, refused)                                       \
    BLAS_API int fn(void *handle, type value)                                  \
    {                                                                          \
        struct sim_cublas_handle *s = live(handle);                            \
        if (s == NULL)                                                         \
            return CUBLAS_STATUS_NOT_INITIALIZED;                              \
        if (refused)                                                           \
            return CUBLAS_STATUS_INVALID_VALUE;                                \
        s->field = value;                                                      \
        return CUBLAS_STATUS_SUCCESS;                                          \
    }
#define GETTER(fn, type, field)                                                \
    BLAS_API int fn(void *handle, type *value)                                 \
    {                                                                          \
        struct sim_cublas_handle *s = live(handle);                            \
        if (s == NULL)                                                         \
            return CUBLAS_STATUS_NOT_INITIALIZED;                              \
        if (value == NULL)                                                     \
            return CUBLAS_STATUS_INVALID_VALUE;                                \
        *value = s->field;                                                     \
        return CUBLAS_STATUS_SUCCESS;                                          \
    }

SETTER(cublasSetStream_v2, void *, stream, 0)
SETTER(cublasSetMathMode, int, math_mode, 0)
GETTER(cublasGetMathMode, int, math_mode)
SETTER(cublasSetPointerMode_v2, int, pointer_mode, 0)
GETTER(cublasGetPointerMode_v2, int, pointer_mode)
SETTER(cublasSetSmCountTarget, int, sm_count_target, value < 0)
