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

/* One row of a range table: a range's bytes in BASE and NEW. */
struct diff_range {
    const char *who;  /* the rank, in a diff of two jobs (ranks_diff.c); else NULL */
    size_t order;     /* rows whose change is the same size sort by this, then path */
    const char *path; /* as text views print it */
    uint64_t base, now;
    bool in_a, in_b;  /* the range is in BASE, in NEW */
};

/* Prints the n rows of v (reordered: largest change first) as a table of
 * at most `top` changed rows, then what was left out and how many were
 * unchanged: the bytes at the peak, or with `live` what was live when the
 * snapshots were taken.  `jobs`: the rows are a rank's, each names it. */
void diff_ranges_print(FILE *f, struct diff_range *v, size_t n, unsigned top, bool live,
                       bool jobs);

/* The message for two runs (two jobs) that opened no range at all. */
void diff_ranges_none(FILE *f, bool jobs);

#endif
