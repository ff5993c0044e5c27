/* rt_churn.c - call sites that know their own counts, for the per-site
 * churn figures: `temporary_site` allocates and frees at once,
 * 10 times (10 temporary); `kept_site` allocates 5, of which 3 are freed
 * later, oldest first (not temporary: other allocations came between). */
#include "progs.h"

static __attribute__((noinline)) void *temporary_site(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

static __attribute__((noinline)) void *kept_site(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

int main(void)
{
    void *kept[5];
    for (int i = 0; i < 10; i++)
        CHECK(cudaFree(temporary_site(1 * MiB)), cudaSuccess);
    for (int i = 0; i < 5; i++)
        kept[i] = kept_site(2 * MiB);
    for (int i = 0; i < 3; i++)
        CHECK(cudaFree(kept[i]), cudaSuccess);
    return 0;
}
