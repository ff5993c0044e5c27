/* snapshot_check.h - the format's cross-field promises, checked on a
 * freshly read model (snapshot_check.c). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_CHECK_H
#define CUMEMTRACE_CLI_SNAPSHOT_CHECK_H

#include "errors.h"
#include "snapshot.h"

/* Checks the invariants of s (read from s->file), resolves group and oom
 * stack ids to indices, sorts stacks by id and devices by ordinal.
 * Returns 0, or a CLI_E* code with err naming the file and the broken
 * rule. */
int snapshot_check(struct snapshot *s, struct cli_error *err);

#endif
