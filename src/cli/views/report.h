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

/* How report_text orders the churn table (--sort; default by allocations),
 * and whether it lists the program's ranges instead of call sites (--by). */
void report_set_sort(enum churn_sort by);
void report_set_by_range(bool by_range);
/* --full: a post-mortem with every table (without it, one screen). */
void report_set_full(bool full);
bool report_is_full(void);


#endif
