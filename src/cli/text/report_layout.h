/* report_layout.h - the address layout part of a driver-fragmentation
 * post-mortem (oom.layout). */
#ifndef CUMEMTRACE_CLI_REPORT_LAYOUT_H
#define CUMEMTRACE_CLI_REPORT_LAYOUT_H

#include <stddef.h>
#include <stdio.h>

#include "snapshot.h"

/* How many of the largest gaps the text names. */
#define REPORT_LAYOUT_GAPS 5

/* The "layout:" lines of a post-mortem: this process's allocations on the
 * device, the largest gaps between them against the request.  Nothing
 * unless the cause is driver fragmentation and the file has a layout. */
void report_layout_lines(FILE *f, const struct snap_oom *o);

#endif
