/* diff.h - the view of two snapshot files (diff.c). */
#ifndef CUMEMTRACE_CLI_DIFF_H
#define CUMEMTRACE_CLI_DIFF_H

#include <stdbool.h>
#include <stdio.h>

#include "gate.h"
#include "sites.h"
#include "snapshot.h"

/* Renders the whole diff of a (base) and b (new) to f: PyTorch's tensors
 * by line where either file has them (and --segments is not given), else call
 * sites grouped by `by` (or the program's ranges compared, by_range), `top`
 * of them; returns 1 when the gate g failed, 0 otherwise, -1 when out of
 * memory. */
int diff_text(FILE *f, struct snapshot *a, struct snapshot *b, enum site_by by,
              bool by_range, unsigned top, const struct gate *g);

#endif
