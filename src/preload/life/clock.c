/* clock.c - a cheap, monotonic nanosecond clock for the allocation path.
 *
 * CLOCK_MONOTONIC is the truth.  Where the CPU says its TSC is invariant
 * (CPUID 0x80000007, EDX bit 8: constant rate, runs in every power state),
 * readings are rdtsc converted by a piecewise-linear function of the TSC,
 * from the first call on:
 *  - clock_init (the constructor, in every process) takes a base anchor
 *    (a tsc, ns pair read close together) and nothing more;
 *    clock_calibrate (the first CUDA call) takes a second one, after a
 *    spin that makes them at least CALIBRATION_NS apart - rarely needed,
 *    since a process's first CUDA call comes later than that - and
 *    bounded by SPIN_MAX readings, so a clock that does not move (a
 *    frozen libfaketime, a stopped VM) leaves CLOCK_MONOTONIC in use
 *    instead of a process spinning forever.  The first piece's rate is
 *    good to ~1e-4 (each anchor is the narrowest of several brackets of
 *    clock_gettime by two rdtsc);
 *  - each piece ends when the time since the base anchor has grown
 *    REFINE_GROWTH-fold (first at FIRST_REFINE_NS); the reader that
 *    crosses the end takes a new anchor and publishes the next piece, whose
 *    rate comes from the whole interval since the base anchor (so the error
 *    shrinks with every piece: ~1e-7 after a second) plus a slew that
 *    brings the clock back onto CLOCK_MONOTONIC by the piece's end.  Each
 *    piece starts where the previous one ended at its first tick, so the
 *    clock never jumps, and never goes back.
 * Without an invariant TSC, and before the first CUDA call, every reading
 * is CLOCK_MONOTONIC.
 *
 * Threads and signals: the pieces live in a fixed array, each written once
 * by the one reader that won the `refining` flag, then published by a
 * release store of clock_piece; readers acquire it.  A reader whose tick
 * lies before the newest piece's start uses the piece it belongs to.  No
 * locks: a signal handler interrupting a recalibration extrapolates the
 * current piece.
 */
#include "clock.h"
#include "torch_protocol.h"

#include <stdbool.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

int64_t clock_origin_ns;

/* 24 pieces: the last one starts FIRST_REFINE_NS * 5^22 (~7e13 s) in */
enum { PIECES = 24 };
struct clock_tsc clock_pieces[PIECES];
int clock_piece = -1;
/* Before the first piece: a piece no tick falls in (span 0), so that the
 * hot path's one compare sends every reading to clock_slow_ns. */
static const struct clock_tsc no_tsc;
const struct clock_tsc *clock_newest = &no_tsc;

#if defined(__x86_64__)
/* Publishes piece i, filled: its span, then the index and the pointer. */
static void publish(int i)
{
    struct clock_tsc *p = &clock_pieces[i];
    p->span = p->tsc_next - p->tsc0;
    __atomic_store_n(&clock_piece, i, __ATOMIC_RELEASE);
    __atomic_store_n(&clock_newest, p, __ATOMIC_RELEASE);
}
#endif

#define CALIBRATION_NS 250000LL   /* the anchors' least distance: a quarter ms */
/* The spin's bound: 2^16 readings of the vDSO clock take milliseconds,
 * well past CALIBRATION_NS on a moving clock. */
#define SPIN_MAX 65536
#define FIRST_REFINE_NS 10000000LL /* 10 ms: the first piece's error is ~1 us */
#define REFINE_GROWTH 5

static uint64_t base_tsc;
static int64_t base_ns;
static int refining;

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - clock_origin_ns;
}

int clock_uses_tsc(void)
{
    return __atomic_load_n(&clock_piece, __ATOMIC_ACQUIRE) >= 0;
}

#if defined(__x86_64__)
/* The narrowest of a few (tsc, ns) brackets; 0 when each one was preempted. */
static int anchor(uint64_t *tsc, int64_t *ns)
{
    uint64_t best = 20000; /* ticks: a few microseconds at any clock rate */
    int found = 0;
    for (int i = 0; i < 6; i++) {
        uint64_t a = __rdtsc();
        int64_t t = monotonic_ns();
        uint64_t b = __rdtsc();
        if (b > a && b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = t;
            found = 1;
        }
    }
    return found;
}

static int invariant_tsc(void)
{
    unsigned a, b, c, d;
    if ((unsigned)__get_cpuid_max(0x80000000u, 0) < 0x80000007u)
        return 0;
    __cpuid(0x80000007u, a, b, c, d);
    return (d >> 8) & 1;
}

static uint64_t fixed(double ns_per_tick)
{
    return (uint64_t)(ns_per_tick * 4294967296.0 + 0.5);
}

/* Ticks of `ns` nanoseconds at `ns_per_tick`. */
static uint64_t ticks(int64_t ns, double ns_per_tick)
{
    return (uint64_t)((double)ns / ns_per_tick);
}
#endif

void clock_init(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    clock_origin_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#if defined(__x86_64__)
    if (!anchor(&base_tsc, &base_ns))
        base_tsc = 0; /* every bracket preempted: no TSC */
#endif
}

void clock_calibrate(void)
{
#if defined(__x86_64__)
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL) || base_tsc == 0 ||
        !invariant_tsc())
        return;
    uint64_t t1;
    int64_t n1;
    for (int i = 0; i < SPIN_MAX && monotonic_ns() - base_ns < CALIBRATION_NS; i++)
        ;
    if (!anchor(&t1, &n1) || t1 <= base_tsc || n1 - base_ns < CALIBRATION_NS)
        return; /* a clock that did not move (enough): CLOCK_MONOTONIC */
    struct clock_tsc *p = &clock_pieces[0];
    p->ns_per_tick = (double)(n1 - base_ns) / (double)(t1 - base_tsc);
    p->mul = fixed(p->ns_per_tick);
    p->tsc0 = t1;
    p->ns0 = n1;
    /* refined once FIRST_REFINE_NS past the base, or at the next reading
     * when the first CUDA call came later than that */
    p->tsc_next = base_tsc + ticks(FIRST_REFINE_NS, p->ns_per_tick);
    if (p->tsc_next <= t1)
        p->tsc_next = t1 + 1;
    publish(0);
#endif
}

#if defined(__x86_64__)
/* The piece's reading at t (the hot path's formula; t may lie a little
 * before tsc0: another CPU's TSC, read as the piece was published). */
static int64_t on_piece(const struct clock_tsc *p, uint64_t t)
{
    if (t >= p->tsc0)
        return p->ns0 + (int64_t)(((unsigned __int128)(t - p->tsc0) * p->mul) >> 32);
    return p->ns0 - (int64_t)(((unsigned __int128)(p->tsc0 - t) * p->mul) >> 32);
}

/* Under `refining`: publishes piece i + 1, starting at the current tick. */
static void refine(int i)
{
    const struct clock_tsc *p = &clock_pieces[i];
    uint64_t t;
    int64_t ns;
    if (!anchor(&t, &ns) || t <= p->tsc0 || ns <= base_ns)
        return; /* retried by the next reading */
    struct clock_tsc *q = &clock_pieces[i + 1];
    int64_t elapsed = ns - base_ns;
    double rate = (double)elapsed / (double)(t - base_tsc);
    int64_t at = on_piece(p, t); /* continuity: the new piece starts here */
    int64_t span = elapsed * (REFINE_GROWTH - 1); /* until the next refine */
    int64_t err = ns - at;                        /* > 0: we were slow */
    if (err < -span / 2)
        err = -span / 2; /* never slower than half speed, never backwards */
    q->tsc0 = t;
    q->ns0 = at;
    q->ns_per_tick = rate * (double)(span + err) / (double)span;
    q->mul = fixed(q->ns_per_tick);
    q->tsc_next = i + 2 < PIECES ? t + ticks(span, rate) : UINT64_MAX;
    publish(i + 1);
}
#endif

int64_t clock_slow_ns(void)
{
#if defined(__x86_64__)
    int i = __atomic_load_n(&clock_piece, __ATOMIC_ACQUIRE);
    if (i >= 0) {
        uint64_t t = __rdtsc();
        while (i > 0 && t < clock_pieces[i].tsc0)
            i--; /* read before the newest piece began */
        if (t >= clock_pieces[i].tsc_next && i + 1 < PIECES &&
            !__atomic_exchange_n(&refining, 1, __ATOMIC_ACQUIRE)) {
            if (__atomic_load_n(&clock_piece, __ATOMIC_ACQUIRE) == i)
                refine(i);
            __atomic_store_n(&refining, 0, __ATOMIC_RELEASE);
            i = __atomic_load_n(&clock_piece, __ATOMIC_ACQUIRE);
            t = __rdtsc();
        }
        return on_piece(&clock_pieces[i], t);
    }
#endif
    return monotonic_ns();
}

int64_t clock_thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* torch_protocol.h: the PyTorch layer's readings are timed as ours. */
__attribute__((visibility("default"))) int64_t cumemtrace_clock_ns(void)
{
    return clock_now_ns();
}
