/* report.h - `cumemtrace report`: the human report and the --json model. */
#ifndef CUMEMTRACE_CLI_REPORT_H
#define CUMEMTRACE_CLI_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "report_churn.h"
#include "snapshot.h"

#define REPORT_TOP_DEFAULT 10 /* call sites listed per table */

/* Prints the report of snapshots s[0..n) to f: with one file its details
 * (an OOM post-mortem first when it is one); with several a per-process
 * table, then the details of the file with the highest device peak.
 * Returns 0, or -1 when out of memory. */
int report_text(FILE *f, struct snapshot **s, size_t n, unsigned top);

/* Prints the normalised model of s[0..n) as JSON (docs/cli.md). */
int report_json(FILE *f, struct snapshot **s, size_t n, unsigned top);

/* Index in s[0..n) of the snapshot with the highest device peak (the
 * first on ties). */
size_t report_pick(struct snapshot **s, size_t n);

/* report_text's options, set from the command line. */
struct report_options {
    enum churn_sort sort; /* --sort: the churn table's order (default by allocations) */
    bool by_range;        /* --by range: the program's ranges instead of call sites */
    bool full;            /* --full: a post-mortem with every table (else one screen:
                             one holders table, the advice, one line per device) */
};
extern struct report_options report_options;


#endif
