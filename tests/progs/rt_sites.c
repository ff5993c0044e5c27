/* rt_sites.c - 512 call sites (distinct stacks: a binary tree of calls 9
 * deep) whose figures tie often and spread over four bytes' worth of
 * values, for the order the snapshot lists sites in (largest first, then
 * by stack id).  Site k allocates 1 + k % 7 times (churn ties) blocks of
 * a size drawn from few values (live and at-peak ties: 1 B to 64 MiB);
 * after the peak, every third site frees its first block, so the sites'
 * current and at-peak figures order differently. */
#include "progs.h"

#define BITS 9
#define SITES (1 << BITS)

static void left(unsigned code, int bits, size_t n, void **out);
static void right(unsigned code, int bits, size_t n, void **out);

static __attribute__((noinline)) void left(unsigned code, int bits, size_t n, void **out)
{
    volatile int keep = bits; /* no tail call: each level is a frame */
    if (bits == 0)
        CHECK(cudaMalloc(out, n), cudaSuccess);
    else if (code & 1)
        right(code >> 1, bits - 1, n, out);
    else
        left(code >> 1, bits - 1, n, out);
    (void)keep;
}

static __attribute__((noinline)) void right(unsigned code, int bits, size_t n, void **out)
{
    volatile int keep = bits;
    if (bits == 0)
        CHECK(cudaMalloc(out, n), cudaSuccess);
    else if (code & 1)
        right(code >> 1, bits - 1, n, out);
    else
        left(code >> 1, bits - 1, n, out);
    (void)keep;
}

int main(void)
{
    static const size_t sizes[] = {1, 300, 4096, 70000, 1 << 20, 5 << 20, 64 << 20};
    static void *first[SITES];
    for (unsigned k = 0; k < SITES; k++) {
        unsigned times = 1 + k % 7;
        size_t n = sizes[(k * 5 + k / 7) % 7];
        for (unsigned t = 0; t < times; t++) {
            void *p;
            left(k, BITS, n, &p);
            if (t == 0)
                first[k] = p;
        }
    }
    for (unsigned k = 0; k < SITES; k += 3)
        CHECK(cudaFree(first[k]), cudaSuccess);
    return 0;
}
