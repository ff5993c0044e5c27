/* dnn.h - what the files of the simulated cuDNN share: status codes, the
 * SIMCUDA_CUDNN_* sizes and the export marker.  NVIDIA's headers are not
 * used: opaque handles are void *, enums int, which is the same ABI. */
#ifndef CUMEMTRACE_SIM_DNN_H
#define CUMEMTRACE_SIM_DNN_H

#include <stdint.h>

/* cudnnStatus_t (cuDNN 9) */
#define CUDNN_STATUS_SUCCESS 0
#define CUDNN_STATUS_NOT_INITIALIZED 1001
#define CUDNN_STATUS_BAD_PARAM 2000
#define CUDNN_STATUS_NOT_SUPPORTED 3000
#define CUDNN_STATUS_ALLOC_FAILED 4003 /* ..._INTERNAL_ERROR_HOST_ALLOCATION_FAILED */

/* A size from the environment, read once into *cache (UINT64_MAX until
 * then; a benign race: every thread reads the same); at most 1 TiB.
 * cudnn.c. */
uint64_t dnn_env_bytes(const char *name, uint64_t *cache);

/* an entry point: the version script generated from cudnn.syms exports it */
#define DNN_API __attribute__((visibility("default")))

#endif
