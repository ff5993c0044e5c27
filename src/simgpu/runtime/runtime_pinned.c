/* runtime_pinned.c - which host memory is page-locked: what cudaMallocHost,
 * cudaHostAlloc and cudaHostRegister returned or registered, until
 * cudaFreeHost or cudaHostUnregister.  cudaPointerGetAttributes reports it
 * as cudaMemoryTypeHost, as NVIDIA's runtime does; PyTorch's is_pinned()
 * asks exactly that (DDP's used-parameters map asserts it).
 *
 * Workload: a handful of ranges (PyTorch's pinned-memory cache grows in
 * blocks); a linear scan is enough.  Threads: one mutex guards the ranges.
 */
#include "runtime.h"

#include <pthread.h>

#include "sim_common.h"

struct range {
    uintptr_t base;
    size_t len;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct range *ranges;
static size_t count, cap;

void runtime_pinned_add(const void *p, size_t len)
{
    if (p == NULL || len == 0)
        return;
    pthread_mutex_lock(&lock);
    /* out of host memory: the range reads as unregistered */
    if (sim_common_grow(&ranges, count, &cap, sizeof *ranges, 32) == 0)
        ranges[count++] = (struct range){(uintptr_t)p, len};
    pthread_mutex_unlock(&lock);
}

void runtime_pinned_remove(const void *p)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count; i++) {
        if (ranges[i].base == (uintptr_t)p) {
            ranges[i] = ranges[--count];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

int runtime_pinned(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < count && !found; i++)
        found = a >= ranges[i].base && a - ranges[i].base < ranges[i].len;
    pthread_mutex_unlock(&lock);
    return found;
}
