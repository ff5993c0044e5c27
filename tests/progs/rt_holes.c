/* rt_holes.c - holes between live allocations, for the address-layout tests
 * (driver-level fragmentation).  On a 256 MiB simulated card, which
 * places each request at the lowest run of free 2 MiB pages:
 *   1. big_scratch() takes 200 MiB and tail() the rest: the run's peak, at
 *      which big_scratch holds most of the card;
 *   2. big_scratch's buffer is freed, and the 200 MiB below the tail are
 *      refilled with 8, 6, 8, 10, 2, 4, 8 MiB and then 2 MiB blocks (fill());
 *   3. the 6, 10 and 4 MiB ones are freed: 20 MiB free in three holes, and a
 *      12 MiB request fails for want of a hole - fragmentation.
 * Freeing the 2 MiB one (small_neighbour()) would merge the 10 and 4 MiB
 * holes around it into 16 MiB: the one free that makes room.  big_scratch's
 * buffer, freed long before the failure, is no lever at all. */
#include "progs.h"

static size_t free_now(void)
{
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t), cudaSuccess);
    return f;
}

__attribute__((noinline)) void *big_scratch(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 200 * MiB), cudaSuccess);
    return p;
}

__attribute__((noinline)) void *tail(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 2 * MiB), cudaSuccess);
    return p;
}

__attribute__((noinline)) void *block(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

__attribute__((noinline)) void *small_neighbour(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 2 * MiB), cudaSuccess);
    return p;
}

__attribute__((noinline)) void *fill(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 2 * MiB), cudaSuccess);
    return p;
}

int main(void)
{
    void *scratch = big_scratch();
    while (free_now() >= 2 * MiB)
        (void)tail();
    CHECK(cudaFree(scratch), cudaSuccess);
    static const size_t sizes[] = {8, 6, 8, 10, 0 /* small_neighbour */, 4, 8};
    void *p[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        p[i] = sizes[i] ? block(sizes[i] * MiB) : small_neighbour();
    while (free_now() >= 2 * MiB)
        (void)fill();
    CHECK(cudaFree(p[1]), cudaSuccess);
    CHECK(cudaFree(p[3]), cudaSuccess);
    CHECK(cudaFree(p[5]), cudaSuccess);
    void *q;
    CHECK(cudaMalloc(&q, 12 * MiB), cudaErrorMemoryAllocation);
    printf("free %zu\n", free_now());
    return 0;
}
