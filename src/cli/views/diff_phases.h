/* diff_phases.h - `cumemtrace diff --by range`: the program's ranges of two
 * runs matched by path (diff_phases.c). */
#ifndef CUMEMTRACE_CLI_DIFF_PHASES_H
#define CUMEMTRACE_CLI_DIFF_PHASES_H

#include <stdio.h>

#include "snapshot.h"

/* Two tables: each range's bytes at its device's peak (summed over
 * devices), then what its allocations held at the dump, BASE -> NEW,
 * largest change first, at most `top` rows each.  Returns -1 on OOM. */
int diff_phases(FILE *f, struct snapshot *a, struct snapshot *b, unsigned top);

#endif
