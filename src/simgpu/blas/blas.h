/* blas.h - what the simulated cuBLAS and cuBLASLt share: status codes and
 * the export marker.  NVIDIA's headers are not used: the stand-ins take
 * opaque handles as void * and enums as int, which is the same ABI. */
#ifndef CUMEMTRACE_SIM_BLAS_H
#define CUMEMTRACE_SIM_BLAS_H

/* cublasStatus_t */
#define CUBLAS_STATUS_SUCCESS 0
#define CUBLAS_STATUS_NOT_INITIALIZED 1
#define CUBLAS_STATUS_ALLOC_FAILED 3
#define CUBLAS_STATUS_INVALID_VALUE 7
#define CUBLAS_STATUS_NOT_SUPPORTED 15

/* An entry point of the library: its version script (generated from the
 * .syms list) decides what is exported; the prototype is here so that
 * -Wmissing-prototypes holds without NVIDIA's headers. */
#define BLAS_API __attribute__((visibility("default")))

#endif
