/* clock.h - nanoseconds since the library loaded, read on every allocation
 * and free.  CLOCK_MONOTONIC through the vDSO is slow on a kvm-clock VM;
 * where the CPU has an invariant TSC the reading comes from rdtsc, cheaper,
 * scaled by a rate calibrated against CLOCK_MONOTONIC (clock.c). */
#ifndef CUMEMTRACE_CLOCK_H
#define CUMEMTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

extern int64_t clock_origin_ns;

/* One piece of the TSC-to-ns conversion: for tsc0 <= tsc < tsc_next,
 * ns = ns0 + (tsc - tsc0) * mul / 2^32 (fixed point: a multiply and a
 * shift, where a double conversion of the unsigned delta costs a dozen
 * instructions).  Written once, before the release store of clock_piece
 * that publishes it; never changed afterwards. */
struct clock_tsc {
    uint64_t tsc0;
    uint64_t span;     /* tsc_next - tsc0: the hot path's one compare */
    int64_t ns0;
    uint64_t mul;       /* ns per tick, times 2^32 */
    uint64_t tsc_next; /* the next recalibration is due here */
    double ns_per_tick; /* the same, for recalibrating */
};
extern struct clock_tsc clock_pieces[];
extern int clock_piece; /* index of the newest piece; -1: no TSC */
/* &clock_pieces[clock_piece], published with it; without a TSC a piece
 * of span 0, never NULL.  The hot path reads the piece through it: no
 * index arithmetic (a good part of a reading's cost), no test. */
extern const struct clock_tsc *clock_newest __attribute__((visibility("hidden")));

/* Sets the origin and takes the TSC's first anchor (a few readings: it
 * runs in every process's constructor). */
void clock_init(void);
/* Where the TSC is invariant, calibrates it against the first anchor
 * (once; at the first CUDA call): readings are rdtsc from then on.  Spins
 * at most ~2 ms, for anchors a quarter of a millisecond apart; a clock
 * that does not move leaves readings on CLOCK_MONOTONIC. */
void clock_calibrate(void);
/* CLOCK_MONOTONIC without a TSC; otherwise the next piece of the
 * conversion, once a recalibration is due.  Async-signal-safe. */
int64_t clock_slow_ns(void);
/* True when readings come from the TSC (for tests). */
int clock_uses_tsc(void);
/* The calling thread's CPU time: what the background thread's pacing counts. */
int64_t clock_thread_cpu_ns(void);

static inline int64_t clock_now_ns(void)
{
#if defined(__x86_64__)
    const struct clock_tsc *p = __atomic_load_n(&clock_newest, __ATOMIC_ACQUIRE);
    uint64_t d = __rdtsc() - p->tsc0;
    if (__builtin_expect(d < p->span, 1)) /* never, without a TSC */
        return p->ns0 + (int64_t)(((unsigned __int128)d * p->mul) >> 32);
#endif
    return clock_slow_ns();
}

#endif
