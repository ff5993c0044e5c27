/* clock.c - a cheap, monotonic nanosecond clock for the allocation path.
 *
 * CLOCK_MONOTONIC is the truth.  Where the CPU says its TSC is invariant
 * (CPUID 0x80000007, EDX bit 8: constant rate, runs in every power state),
 * we anchor (tsc, ns) pairs at start-up and again once a full second has
 * passed, and from then on convert rdtsc with the measured rate.  Each anchor
 * reads the TSC on both sides of clock_gettime and is retried if the two are
 * far apart (the thread was preempted in between), so the rate is good to a
 * few parts in 10^8: well under a millisecond per hour of drift.  Until the
 * second anchor exists every reading is CLOCK_MONOTONIC.
 *
 * Threads: one thread wins the calibration by compare-and-swap and publishes
 * the rate with a release store of clock_tsc_ready; readers acquire it.
 */
#include "clock.h"

#include <stdbool.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

int64_t clock_origin_ns;
struct clock_tsc clock_tsc;
int clock_tsc_ready;

enum { TSC_NONE, TSC_ANCHORED, TSC_CALIBRATING };
static int tsc_state = TSC_NONE;
static uint64_t anchor_tsc;
static int64_t anchor_ns;

#define CALIBRATION_NS 1000000000LL /* a second of CLOCK_MONOTONIC first */

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - clock_origin_ns;
}

#if defined(__x86_64__)
/* One (tsc, ns) pair read close together; 0 when it kept being preempted. */
static int anchor(uint64_t *tsc, int64_t *ns)
{
    for (int i = 0; i < 8; i++) {
        uint64_t a = __rdtsc();
        int64_t t = monotonic_ns();
        uint64_t b = __rdtsc();
        if (b - a < 20000) { /* a few microseconds at any clock rate */
            *tsc = a + (b - a) / 2;
            *ns = t;
            return 1;
        }
    }
    return 0;
}

static int invariant_tsc(void)
{
    unsigned a, b, c, d;
    if ((unsigned)__get_cpuid_max(0x80000000u, 0) < 0x80000007u)
        return 0;
    __cpuid(0x80000007u, a, b, c, d);
    return (d >> 8) & 1;
}
#endif

void clock_init(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    clock_origin_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#if defined(__x86_64__)
    if (invariant_tsc() && anchor(&anchor_tsc, &anchor_ns))
        __atomic_store_n(&tsc_state, TSC_ANCHORED, __ATOMIC_RELEASE);
#endif
}

int64_t clock_slow_ns(void)
{
    int64_t now = monotonic_ns();
#if defined(__x86_64__)
    int expected = TSC_ANCHORED;
    if (now - anchor_ns >= CALIBRATION_NS &&
        __atomic_load_n(&tsc_state, __ATOMIC_ACQUIRE) == TSC_ANCHORED &&
        __atomic_compare_exchange_n(&tsc_state, &expected, TSC_CALIBRATING, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        uint64_t tsc;
        int64_t ns;
        if (anchor(&tsc, &ns) && tsc > anchor_tsc) {
            clock_tsc.ns_per_tick = (double)(ns - anchor_ns) / (double)(tsc - anchor_tsc);
            clock_tsc.tsc0 = tsc;
            clock_tsc.ns0 = ns;
            __atomic_store_n(&clock_tsc_ready, 1, __ATOMIC_RELEASE);
        } else {
            __atomic_store_n(&tsc_state, TSC_ANCHORED, __ATOMIC_RELEASE);
        }
    }
#endif
    return now;
}
