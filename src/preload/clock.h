/* clock.h - nanoseconds since the library loaded, read on every allocation
 * and free.  CLOCK_MONOTONIC through the vDSO costs 27 ns on a kvm-clock VM;
 * where the CPU has an invariant TSC the reading comes from rdtsc (~10 ns)
 * scaled by a rate calibrated against CLOCK_MONOTONIC (clock.c). */
#ifndef CUMEMTRACE_CLOCK_H
#define CUMEMTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

extern int64_t clock_origin_ns;

/* The TSC-to-ns conversion, valid once clock_tsc_ready is 1. */
struct clock_tsc {
    uint64_t tsc0;
    int64_t ns0;
    double ns_per_tick;
};
extern struct clock_tsc clock_tsc;
extern int clock_tsc_ready;

/* Sets the origin; starts TSC calibration where the TSC is invariant. */
void clock_init(void);
/* CLOCK_MONOTONIC, and the calibration step once enough time has passed. */
int64_t clock_slow_ns(void);

static inline int64_t clock_now_ns(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(__atomic_load_n(&clock_tsc_ready, __ATOMIC_ACQUIRE), 1))
        return clock_tsc.ns0 +
               (int64_t)((double)(__rdtsc() - clock_tsc.tsc0) * clock_tsc.ns_per_tick);
#endif
    return clock_slow_ns();
}

#endif
