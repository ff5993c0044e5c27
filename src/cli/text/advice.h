/* advice.h - what to do, computed from measured facts of a snapshot.
 *
 * Every line has a trigger that a number in the snapshot must meet; with no
 * trigger met there is no advice (never boilerplate).  Lines are ordered by
 * how much memory each would free (advice.bytes), largest first.  No line
 * names a GPU size computed from the failing request alone.  Each line's id
 * and trigger are a row of docs/cli.md's Advice table (the one place they
 * are listed); the thresholds are advice_line.h's ADVICE_* constants.
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
