/* cfi.h - how to step from a frame to its caller's, read from the modules'
 * .eh_frame (the call-frame information every x86-64 object carries for C++
 * exceptions and debuggers), for the frame-rule stack walk in unwind.c. */
#ifndef CUMEMTRACE_CFI_H
#define CUMEMTRACE_CFI_H

#include <stdbool.h>
#include <stdint.h>

/* The rule of a frame at one return address, in the shape compilers emit:
 * CFA = (rbp or rsp) + cfa_off, the return address at CFA - 8, and rbp
 * either unchanged (rbp_off 0) or saved at CFA + rbp_off. */
struct cfi_rule {
    bool cfa_rbp;     /* CFA from rbp, else from rsp */
    bool last;        /* the outermost frame: no caller (_start, clone) */
    uint32_t cfa_off;
    int32_t rbp_off;
};

/* Loads the module finder (glibc's _dl_find_object, 2.35+).  False when
 * there is none: every lookup then fails. */
bool cfi_init(void);

/* The rule for the frame whose return address is `ra`: true and *r filled,
 * or false when the frame needs anything else (a signal frame, a DWARF
 * expression, the CFA in another register, no FDE at all).  Lock-free,
 * async-signal-safe, no allocation; answers are cached per address. */
bool cfi_rule(uintptr_t ra, struct cfi_rule *r);

/* The same answer packed, for the walk's inner loop (cfi_entry inlines the
 * cache probe).  Entry bits, low to high: 1 spare | 1 cfa_rbp | 1 last |
 * 16 cfa_off/8 (bits 3-18: the offset itself, a multiple of 8) | 8 rbp
 * slot (bits 19-26: rbp at CFA - slot, slot <= 2040; 0: unchanged) | 37 tag
 * (ra >> CFI_SET_BITS).  cfa_off 0 means "no plain rule" (or, with last,
 * the outermost frame); so does the empty entry 0.  A tag compare on the
 * whole high part cannot match an address of 2^48 or more.
 *
 * The cache is set-associative: 2^CFI_SET_BITS sets of CFI_WAYS words.
 * Direct-mapped, two hot return addresses of one index evicted each other
 * and every capture parsed .eh_frame again; here up
 * to CFI_WAYS addresses of a set stay, the first two found inline. */
enum { CFI_CACHE_BITS = 13, CFI_WAYS = 4, CFI_SET_BITS = 11 };
_Static_assert(1 << CFI_CACHE_BITS == CFI_WAYS << CFI_SET_BITS, "sets x ways = words");
#define CFI_RBP 2u
#define CFI_LAST 4u
#define CFI_TAG_SHIFT 27
#define CFI_CFA_OFF(e) ((uintptr_t)(e) & (uintptr_t)0x7fff8)
#define CFI_RBP_SLOT(e) ((uintptr_t)((e) >> 16) & (uintptr_t)0x7f8)

/* The set of ra's rule (tests/bench/bench_alloc.c's sites pattern picks
 * call sites that share one). */
static inline unsigned cfi_set(uintptr_t ra)
{
    return (unsigned)((ra ^ (ra >> CFI_SET_BITS)) & ((1u << CFI_SET_BITS) - 1));
}

extern uint64_t cfi_cache[1 << CFI_CACHE_BITS] __attribute__((visibility("hidden")));
/* Fills the cache entry of ra (a miss of ways 0 and 1), returns it. */
uint64_t cfi_fill(uintptr_t ra);

static inline uint64_t cfi_entry(uintptr_t ra)
{
    uint64_t tag = (uint64_t)ra >> CFI_SET_BITS;
    const uint64_t *set = &cfi_cache[cfi_set(ra) * CFI_WAYS];
    uint64_t e = __atomic_load_n(&set[0], __ATOMIC_RELAXED);
    if (__builtin_expect(e >> CFI_TAG_SHIFT != tag, 0)) {
        e = __atomic_load_n(&set[1], __ATOMIC_RELAXED);
        if (e >> CFI_TAG_SHIFT != tag)
            e = cfi_fill(ra);
    }
    return e;
}

#endif
