/* diff_tensors.h - `cumemtrace diff`'s live tensors by Python line
 * (PyTorch's allocation history), beside the cached segments. */
#ifndef CUMEMTRACE_CLI_DIFF_TENSORS_H
#define CUMEMTRACE_CLI_DIFF_TENSORS_H

#include <stdbool.h>
#include <stdio.h>

#include "snapshot.h"

/* Whether either side names its live tensors (top_tensors). */
bool diff_tensors_present(const struct snapshot *a, const struct snapshot *b);

/* Prints the table of base -> new by Python line, largest change first, up
 * to `top` lines; nothing when neither side has PyTorch's history.
 * Returns 0, or -1 when out of memory. */
int diff_tensors_print(FILE *f, struct snapctx *ctx, const struct snapshot *a,
                       const struct snapshot *b, unsigned top);

#endif
