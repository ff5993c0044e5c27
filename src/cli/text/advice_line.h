/* advice_line.h - one line of advice (advice.h says what triggers each)
 * and what both advice.c and oom_causes.c's rows use to add one: the
 * thresholds, advice_add, and what the failing request lacked.
 */
#ifndef CUMEMTRACE_CLI_ADVICE_LINE_H
#define CUMEMTRACE_CLI_ADVICE_LINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Who lacked the shortfall, into buf: "this request", or, when the failing
 * call is a step of the allocator's larger request (an expandable segment's
 * 20 MiB cuMemCreate for a 172 MiB tensor), that call named with the request
 * it serves, then returns true: the shortfall is the call's, and nothing
 * here measures what the whole request lacked. */
bool advice_lacking(const struct snapshot *s, char *buf, size_t n);

#endif
