/* report_phases.h - the report's view of the program's phases (NVTX ranges,
 * PyTorch's phases): the peak by range (report_phases.c). */
#ifndef CUMEMTRACE_CLI_REPORT_PHASES_H
#define CUMEMTRACE_CLI_REPORT_PHASES_H

#include <stdio.h>

#include "snapshot.h"

/* "Ranges at peak (X)": each range's bytes at the peak (exact), its share
 * of `peak`, what it holds now, its allocations, and the call site holding
 * most of it; at most `top` rows.  Nothing when the file has no by_phase.
 * Returns -1 on OOM. */
int report_phases(FILE *f, struct snapshot *s, const struct snap_phase_rows *rows,
                  uint64_t peak, unsigned top);

/* rows->v as the table orders them (largest at the peak first, then
 * largest now, then by phase id): a malloc'd array the caller frees, NULL
 * when out of memory. */
const struct snap_phase_row **report_phases_sorted(const struct snap_phase_rows *rows);

/* One line saying how to see the peak by range, when the file has some. */
void report_phases_hint(FILE *f, const struct snapshot *s, const struct snap_phase_rows *rows);

#endif
