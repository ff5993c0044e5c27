/* report_churn.h - per-call-site churn over the whole run (allocations,
 * frees, bytes allocated, temporary frees: heaptrack's -a and -T), from a
 * device's `churn` rows. */
#ifndef CUMEMTRACE_CLI_REPORT_CHURN_H
#define CUMEMTRACE_CLI_REPORT_CHURN_H

#include <stdio.h>

#include "snapshot.h"

enum churn_sort { CHURN_BY_ALLOCS, CHURN_BY_BYTES, CHURN_BY_TEMPORARY };

/* "allocs", "bytes", "temporary" -> the order; -1 for anything else. */
int churn_sort_parse(const char *name);

/* The table of device d's call sites by `by` (top N), or nothing when no
 * site ever freed (a run that only grew has no churn to show).  Returns 0,
 * or -1 when out of memory. */
int report_churn(FILE *f, struct snapshot *s, const struct snap_device *d,
                 enum churn_sort by, unsigned top);

#endif
