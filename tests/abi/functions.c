/* functions.c - every CUDA prototype we declare must be NVIDIA's, exactly.
 *
 * check_abi.py compiles this file twice, as C and as C++, with NVIDIA's
 * headers on the include path and CUMEMTRACE_OFFICIAL_CUDA defined (so
 * cuda_api.h uses NVIDIA's types instead of our cuda_types.h):
 *
 *   1. NVIDIA's cuda.h and cuda_runtime_api.h in the mode NVIDIA builds its
 *      own libraries with (__CUDA_API_VERSION_INTERNAL): every ABI variant is
 *      then declared under its real name - cuMemAlloc(CUdeviceptr_v1 *,
 *      unsigned int) and cuMemAlloc_v2, cuMemAllocAsync and
 *      cuMemAllocAsync_ptsz, cudaMallocAsync and cudaMallocAsync_ptsz - and
 *      none of the "#define cuMemAlloc cuMemAlloc_v2" renames is left.
 *   2. abi_declared.h (generated from cuda_api.h and resolve.h): for each of
 *      our prototypes, the name must already be declared by NVIDIA and must
 *      not be a macro, so no prototype escapes the check below unnoticed.
 *   3. our cuda_api.h, then abi_extra.h (the CUDA prototypes that
 *      src/preload/interpose/resolve.h adds, copied token for token by check_abi.py):
 *      any difference in a parameter or return type is now a redeclaration
 *      error.  C alone would accept an enum where NVIDIA has unsigned int
 *      (GCC makes such enums compatible with unsigned int); C++ does not,
 *      and it rejects an extern "C" redeclaration with other parameter types.
 */

/* NVIDIA's own macro (hence the reserved name): declare every ABI variant. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "abi_declared.h"

#include "cuda_api.h"

#include "abi_extra.h"
