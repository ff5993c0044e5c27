/* advice.h - what to do, computed from measured facts of a snapshot.
 *
 * Every line has a trigger that a number in the snapshot must meet; with no
 * trigger met there is no advice (never boilerplate).  Lines are ordered by
 * how much memory each would free (advice.bytes), largest first.  No line
 * names a GPU size computed from the failing request alone.  The triggers,
 * documented in docs/cli.md:
 *
 *   id                  trigger
 *   expandable-segments oom.cause "allocator_fragmentation",
 *                       expandable_segments:True not in PyTorch's config, and
 *                       free blocks at segment edges join into a run >= the
 *                       request, or their whole pages and the device's free
 *                       memory cover the request in pages (or the segments
 *                       were not recorded)
 *   live-holes          the same otherwise: the free space lies in holes
 *                       between live tensors; says what each setting does
 *   memory-fraction     oom.cause "allocator_limit"
 *   refused-while-free  oom.cause "refused_while_free" (driver: free >=
 *                       request): what explains it (oom_text_refusal), or
 *                       that nothing measured does - never fragmentation
 *   limit               oom.cause "limit" (CUMEMTRACE_LIMIT)
 *   untracked           untracked beyond ADVICE_CONTEXT_BYTES covers what
 *                       the request lacked, or untracked > ADVICE_UNTRACKED_PCT
 *                       % of the device (and beyond a context)
 *   activations         oom.cause "exhausted" and stacks under a Python
 *                       `forward` hold >= ADVICE_DOMINANT_PCT % at the failure
 *                       (PyTorch: of the failure's tensors only)
 *   exhausted           oom.cause "exhausted" otherwise
 *   optimizer-state     an OOM whose allocator roles give the optimizer's
 *                       state >= ADVICE_OPTIMIZER_PCT % of PyTorch's tensors
 *   whole-run           oom.cause "exhausted": the run's need is unknown
 *   dominant-site       one call site holds >= ADVICE_DOMINANT_PCT % of what
 *                       is held at the failure (OOM), else of a device's peak
 *                       (PyTorch: of its tensors only, at the failure or peak)
 *   peak-unrecorded     a device PyTorch's allocator holds, without the
 *                       peak's tensors in the file: what is known of the
 *                       peak, no line named, and when the layer reads them
 *   small-segments      a device has >= ADVICE_SMALL_COUNT live allocations
 *                       under 1 MiB
 *   granularity         rounding to the granularity wastes >= ADVICE_WASTE_PCT %
 *                       of a device's live bytes and >= ADVICE_WASTE_MIN bytes
 *   verified-fix        `cumemtrace fit` ran the script with an allocator
 *                       setting on the same simulated card and it fitted,
 *                       and no other line names that setting (first line;
 *                       a line naming a setting tried says what it gave)
 * Recovered retry chains give no advice: they are routine.
 */
#ifndef CUMEMTRACE_CLI_ADVICE_H
#define CUMEMTRACE_CLI_ADVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "advice_line.h"
#include "snapshot.h"

/* Fills out[0..ADVICE_MAX) with the advice that applies to s, most urgent
 * first, and returns how many.  Returns -1 when out of memory. */
int advice_compute(struct snapshot *s, struct advice *out);

/* After advice_compute's lines out[0..*n) for a post-mortem: marks each line
 * naming an allocator setting that `cumemtrace fit` tried on the simulated
 * card (fixes.txt beside s->file) with what the try gave, and puts a line for
 * a setting that fitted and no line names first.  advice_verified.c. */
void advice_verified(const struct snapshot *s, struct advice *out, int *n);

#endif
