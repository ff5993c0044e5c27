/* diff_tensors.h - `cumemtrace diff`'s live tensors by Python line
 * (PyTorch's allocation history), beside the cached segments. */
#ifndef CUMEMTRACE_CLI_DIFF_TENSORS_H
#define CUMEMTRACE_CLI_DIFF_TENSORS_H

#include <stdbool.h>
#include <stdio.h>

#include "snapshot.h"

/* Prints the table of base -> new by Python line, largest change first, up
 * to `top` lines; nothing when neither side has PyTorch's history.
 * Returns 0, or -1 when out of memory. */
int diff_tensors_print(FILE *f, struct snapctx *ctx, const struct snapshot *a,
                       const struct snapshot *b, unsigned top);

/* Whether either side has the tensor model (tensors, peak_tensors or
 * oom.allocator.tensors). */
bool diff_tensors_model(const struct snapshot *a, const struct snapshot *b);

/* The tensor model's tables, largest change first, up to `top` rows each:
 * the peak's tensors by line, the live ones (at the failure of a
 * post-mortem, else at the dump), and the growth - between the two dumps
 * when both come from one run (the rate a step where both know their
 * step), else NEW's own `growth`.  Returns 0, or -1 when out of memory. */
int diff_tensors_model_print(FILE *f, struct snapshot *a, struct snapshot *b, unsigned top);

#endif
