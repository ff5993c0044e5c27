/* advice.h - what to do, computed from measured facts of a snapshot.
 *
 * Every line has a trigger that a number in the snapshot must meet; with no
 * trigger met there is no advice (never boilerplate).  The triggers and
 * their thresholds, documented in docs/cli.md:
 *
 *   id              trigger
 *   fragmentation   oom.cause is "fragmentation" (free >= request)
 *   limit           oom.cause is "limit"
 *   exhausted       oom.cause is "exhausted" (free < request)
 *   untracked       oom.untracked_bytes > ADVICE_UNTRACKED_PCT % of total
 *   dominant-site   one call site holds >= ADVICE_DOMINANT_PCT % of a
 *                   device's peak (for an OOM: of the failing device)
 *   small-segments  a device has >= ADVICE_SMALL_COUNT live allocations
 *                   under 1 MiB
 *   granularity     rounding to the granularity wastes >= ADVICE_WASTE_PCT %
 *                   of a device's live bytes and >= ADVICE_WASTE_MIN bytes
 *   recovered       ooms.recovered > 0 (the job ran at the edge)
 */
#ifndef CUMEMTRACE_CLI_ADVICE_H
#define CUMEMTRACE_CLI_ADVICE_H

#include <stddef.h>

#include "snapshot.h"

/* A quarter of the card held by someone else is more than a CUDA context
 * (~0.3-1 GiB) and library workspaces explain on any current GPU. */
#define ADVICE_UNTRACKED_PCT 25
/* Half the peak from one call site: that site is the lever. */
#define ADVICE_DOMINANT_PCT 50
/* Below ~1000 small cudaMallocs the per-call cost and 2 MiB rounding are
 * noise; above, an allocator that pools them pays off. */
#define ADVICE_SMALL_COUNT 1000
/* Rounding waste worth acting on: a tenth of live memory, and at least
 * 64 MiB so that tiny processes are not lectured. */
#define ADVICE_WASTE_PCT 10
#define ADVICE_WASTE_MIN ((uint64_t)64 << 20)

#define ADVICE_MAX 16
#define ADVICE_TEXT 640

struct advice {
    const char *id;          /* stable name, see the table above */
    char text[ADVICE_TEXT];  /* one paragraph, no trailing newline */
};

/* Fills out[0..ADVICE_MAX) with the advice that applies to s, most urgent
 * first, and returns how many.  Returns -1 when out of memory. */
int advice_compute(struct snapshot *s, struct advice *out);

#endif
