/* report_holders.h - the text of who holds memory (model/holders.h):
 * PyTorch's tensors by the user's line, their cache as one row, the
 * growth by line; report prints them at the failure, at the peak and at
 * the dump. */
#ifndef CUMEMTRACE_CLI_REPORT_HOLDERS_H
#define CUMEMTRACE_CLI_REPORT_HOLDERS_H

#include <stdio.h>

#include "holders.h"

/* Lines of a holders table without --full: about a screen; past it the
 * tail is one row ("N more lines"). */
#define REPORT_HOLDERS_SCREEN 20

/* A table of h's tensor holders at `indent`: bytes, % of `whole`, blocks,
 * the line, and below each its callers (--full: the whole stack shown
 * beneath and above it) or autograd's node; at most `rows` rows (0: all),
 * the rest folded into one row, and the writer's own fold (`more`) as the
 * last.  Returns -1 when out of memory. */
int report_holders_table(FILE *f, struct snapshot *s, const struct holders *h, uint64_t whole,
                         unsigned rows, int indent);

/* "PyTorch's cache: 512 MiB in 6 segments, largest free block 256 MiB",
 * with `tail` after it; nothing when h has no cache row. */
void report_holders_cache(FILE *f, const struct holders *h, const char *tail, int indent);

/* The growth by line of device d, one sentence a row ("+196 MiB a step at
 * model.py:160:head, steps 1-12, 2.30 GiB now"); nothing when the file
 * did not measure it.  Returns -1 when out of memory. */
int report_holders_growth(FILE *f, struct snapshot *s, const struct snap_device *d,
                          int indent);

#endif
