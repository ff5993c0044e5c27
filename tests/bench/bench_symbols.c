/* bench_symbols.c - the module the big benchmark snapshot's native frames
 * point into (scripts/gen_big_snapshot.py --module), so that `make bench`
 * measures what resolving them from debug information costs: built with
 * -g, 4096 static functions (named only by .symtab and DWARF, as a
 * program's own helpers are), each with an inlined helper (inlined call
 * chains in DWARF).  Run, it calls each once and prints a checksum, which
 * keeps every function in the binary.
 *
 *   bench_symbols            prints "sum=..."
 */
#include <stdio.h>

static inline __attribute__((always_inline)) long mix(long x, long k)
{
    return x * 31 + k;
}

#define F(n)                                                                            \
    __attribute__((noinline)) static long f_##n(long x)                                 \
    {                                                                                   \
        long y = mix(x, 0x##n);                                                         \
        if (y & 1)                                                                      \
            y = mix(y, 0x##n + 1);                                                      \
        return y ^ (y >> 3);                                                            \
    }
#define F16(p) F(p##0) F(p##1) F(p##2) F(p##3) F(p##4) F(p##5) F(p##6) F(p##7)         \
               F(p##8) F(p##9) F(p##a) F(p##b) F(p##c) F(p##d) F(p##e) F(p##f)
#define F256(p) F16(p##0) F16(p##1) F16(p##2) F16(p##3) F16(p##4) F16(p##5) F16(p##6)  \
                F16(p##7) F16(p##8) F16(p##9) F16(p##a) F16(p##b) F16(p##c) F16(p##d)  \
                F16(p##e) F16(p##f)
F256(0) F256(1) F256(2) F256(3) F256(4) F256(5) F256(6) F256(7)
F256(8) F256(9) F256(a) F256(b) F256(c) F256(d) F256(e) F256(f)

#define T(n) f_##n,
#define T16(p) T(p##0) T(p##1) T(p##2) T(p##3) T(p##4) T(p##5) T(p##6) T(p##7)         \
               T(p##8) T(p##9) T(p##a) T(p##b) T(p##c) T(p##d) T(p##e) T(p##f)
#define T256(p) T16(p##0) T16(p##1) T16(p##2) T16(p##3) T16(p##4) T16(p##5) T16(p##6)  \
                T16(p##7) T16(p##8) T16(p##9) T16(p##a) T16(p##b) T16(p##c) T16(p##d)  \
                T16(p##e) T16(p##f)
static long (*const table[])(long) = {
    T256(0) T256(1) T256(2) T256(3) T256(4) T256(5) T256(6) T256(7)
    T256(8) T256(9) T256(a) T256(b) T256(c) T256(d) T256(e) T256(f)
};

int main(void)
{
    long sum = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        sum += table[i]((long)i);
    printf("sum=%ld\n", sum);
    return 0;
}
