/* rt_symbols.c - allocations from a static function and an inlined helper,
 * so that the CLI's debug-information look-up has something only DWARF
 * and .symtab can name.  tests/e2e/test_symbols.py builds variants of it
 * (stripped; rebuilt with code moved but lines kept: -DPAD).
 * The LINE markers are read by the test: keep them on the calls. */
#include "progs.h"

#ifdef PAD
/* Code before every function moves their offsets, not their lines. */
#define PADDING __attribute__((used, noinline)) static int pad_code(int x) { volatile int v = x; for (int i = 0; i < 64; i++) v = v * 31 + i; return v; }
#else
#define PADDING
#endif
PADDING

static __attribute__((noinline)) void *hidden_alloc(size_t bytes)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, bytes), cudaSuccess); /* LINE:hidden_alloc */
    return p;
}

static inline __attribute__((always_inline)) void *inlined_alloc(size_t bytes)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, bytes), cudaSuccess); /* LINE:inlined_alloc */
    return p;
}

static __attribute__((noinline)) void *outer_of_inlined(size_t bytes)
{
    void *p = inlined_alloc(bytes); /* LINE:outer_call */
    __asm__ volatile("" ::: "memory"); /* keeps the call out of the tail */
    return p;
}

int main(void)
{
    void *a = hidden_alloc(3 * MiB);
    void *b = outer_of_inlined(5 * MiB);
    (void)a;
    (void)b;
    return 0;
}
