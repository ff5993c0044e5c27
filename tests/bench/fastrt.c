/* fastrt.c - a lock-free stand-in for libcudart.so.13, for `make bench`'s
 * thread-scaling row only (never used by the tests, never installed).
 *
 * The simulated runtime (src/simgpu) serialises every call on its own lock, so
 * traced throughput at N threads measured on it says more about the
 * simulator than about the tracer.  This library answers cudaMalloc with an
 * address from a per-thread arena and cudaFree with success, sharing nothing
 * between threads: whatever stops the traced loop from scaling is then the
 * tracer's.  It implements just what bench_alloc's `pair runtime` workload
 * and the tracer call: cudaMalloc, cudaFree, cudaGetDevice, cudaSetDevice,
 * cudaGetDeviceCount.
 */
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cudaError_t; /* 0 = cudaSuccess */

/* The runtime's declarations of what this library exports (cuda_api.h's,
 * without its types). */
EXPORT cudaError_t cudaMalloc(void **p, size_t size);
EXPORT cudaError_t cudaFree(void *p);
EXPORT cudaError_t cudaGetDevice(int *dev);
EXPORT cudaError_t cudaSetDevice(int dev);
EXPORT cudaError_t cudaGetDeviceCount(int *n);

/* Per-thread arenas of 1 TiB each, handed out once per thread (the only
 * shared write): addresses never collide between threads. */
#define ARENA (UINT64_C(1) << 40)
static uint64_t next_arena = UINT64_C(1) << 44;
/* Freed blocks of this thread, reused last-in first-out like a caching
 * allocator, so the tracer sees the same addresses come back. */
#define SPARE 4096
static __thread uintptr_t bump, spare[SPARE];
static __thread unsigned nspare;

EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    if (p == NULL)
        return 1; /* cudaErrorInvalidValue */
    if (nspare > 0) {
        *p = (void *)spare[--nspare];
        return 0;
    }
    if (bump == 0)
        bump = (uintptr_t)__atomic_fetch_add(&next_arena, ARENA, __ATOMIC_RELAXED);
    /* 4 KiB steps whatever the size: the workload asks for 4096 bytes */
    *p = (void *)bump;
    bump += size > 4096 ? (size + 4095) / 4096 * 4096 : 4096;
    return 0;
}

EXPORT cudaError_t cudaFree(void *p)
{
    if (p != NULL && nspare < SPARE)
        spare[nspare++] = (uintptr_t)p;
    return 0;
}

EXPORT cudaError_t cudaGetDevice(int *dev)
{
    *dev = 0;
    return 0;
}

EXPORT cudaError_t cudaSetDevice(int dev)
{
    return dev == 0 ? 0 : 101; /* cudaErrorInvalidDevice */
}

EXPORT cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return 0;
}
