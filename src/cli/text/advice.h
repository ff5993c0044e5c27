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
 *                       peak, no line named, and CUMEMTRACE_TORCH_PEAK=1
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

#include "oom_text.h"
#include "snapshot.h"

/* A quarter of the card held by someone else is more than a CUDA context
 * (~0.3-1 GiB) and library workspaces explain on any current GPU. */
#define ADVICE_UNTRACKED_PCT 25
/* What this process's own CUDA context and library workspaces may hold
 * outside its allocations: only untracked memory beyond it can be another
 * process's (oom_text.h, and the library's other_processes cause). */
#define ADVICE_CONTEXT_BYTES OOM_TEXT_CONTEXT_BYTES
/* A quarter of the tensors in optimizer state (AdamW's is twice fp32
 * parameters: with their gradients, half of a small-activation run). */
#define ADVICE_OPTIMIZER_PCT 25
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
#define ADVICE_TEXT 2048 /* a line, and what fit verified of it (advice_verified.c) */

struct advice {
    const char *id;          /* stable name, see the table above */
    uint64_t bytes;          /* what following it would free (the order) */
    int order;               /* the order it was found in (ties) */
    char text[ADVICE_TEXT];  /* one paragraph, no trailing newline */
};

/* Adds a line to out[0..*n) unless it is full (oom_causes.c's rows add
 * their cause's lines with it). */
void advice_add(struct advice *out, int *n, const char *id, uint64_t bytes, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

/* What the failing request lacked: the recorded shortfall, else request -
 * free; 0 when not known. */
uint64_t advice_short_by(const struct snap_oom *o);

/* Who lacked the shortfall, into buf: "this request", or the failing call
 * named with the allocator's request it serves (then returns true). */
bool advice_lacking(const struct snapshot *s, char *buf, size_t n);

/* Fills out[0..ADVICE_MAX) with the advice that applies to s, most urgent
 * first, and returns how many.  Returns -1 when out of memory. */
int advice_compute(struct snapshot *s, struct advice *out);

/* After advice_compute's lines out[0..*n) for a post-mortem: marks each line
 * naming an allocator setting that `cumemtrace fit` tried on the simulated
 * card (fixes.txt beside s->file) with what the try gave, and puts a line for
 * a setting that fitted and no line names first.  advice_verified.c. */
void advice_verified(const struct snapshot *s, struct advice *out, int *n);

#endif
