/* libmanysyms.c - a library with 10,000 exported functions and 64 call
 * sites of cudaMalloc (tests/e2e/test_dump_cost.py): the dynamic symbol
 * table a dump names frames from is as long as a small framework's, so a
 * per-address scan of it (dladdr) shows in the dump's cost. */
#include <stddef.h>

typedef int (*alloc_fn)(void **, size_t);

/* The padding: pad_x0000 ... pad_x9999. */
#define F(n) int pad_##n(int x); int pad_##n(int x) { return x + 1; }
#define D0(p) F(p##0) F(p##1) F(p##2) F(p##3) F(p##4) F(p##5) F(p##6) F(p##7) F(p##8) F(p##9)
#define D1(p) D0(p##0) D0(p##1) D0(p##2) D0(p##3) D0(p##4) D0(p##5) D0(p##6) D0(p##7) D0(p##8) D0(p##9)
#define D2(p) D1(p##0) D1(p##1) D1(p##2) D1(p##3) D1(p##4) D1(p##5) D1(p##6) D1(p##7) D1(p##8) D1(p##9)
#define D3(p) D2(p##0) D2(p##1) D2(p##2) D2(p##3) D2(p##4) D2(p##5) D2(p##6) D2(p##7) D2(p##8) D2(p##9)
D3(x)

/* 64 call sites, each its own return address in this library. */
#define S(n) \
    __attribute__((noinline)) int site_##n(alloc_fn f, void **p, size_t size); \
    __attribute__((noinline)) int site_##n(alloc_fn f, void **p, size_t size) \
    { \
        int rc = f(p, size + n); \
        __asm__ volatile("" ::: "memory"); /* not a tail call */ \
        return rc; \
    }
#define S8(p) S(p##0) S(p##1) S(p##2) S(p##3) S(p##4) S(p##5) S(p##6) S(p##7)
S8(1) S8(2) S8(3) S8(4) S8(5) S8(6) S8(7) S8(8)

#define R(n) site_##n,
#define R8(p) R(p##0) R(p##1) R(p##2) R(p##3) R(p##4) R(p##5) R(p##6) R(p##7)
static int (*const sites[64])(alloc_fn, void **, size_t) = {
    R8(1) R8(2) R8(3) R8(4) R8(5) R8(6) R8(7) R8(8)
};

int manysyms_alloc(int i, alloc_fn f, void **p, size_t size);
int manysyms_alloc(int i, alloc_fn f, void **p, size_t size)
{
    return sites[i & 63](f, p, size);
}
