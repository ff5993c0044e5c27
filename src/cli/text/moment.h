/* moment.h - when a snapshot was taken, in the words views that compare two
 * snapshots use ("at exit", "at its api dump"), from its `reason`. */
#ifndef CUMEMTRACE_CLI_MOMENT_H
#define CUMEMTRACE_CLI_MOMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "snapshot.h"

/* "at its OOM" for a post-mortem, "at exit", "at its api dump", "at its
 * signal dump (SIGUSR1)", "at its periodic dump", "before its exec", "at
 * its stream checkpoint", "at its last checkpoint (killed)", or "at its
 * <reason> dump" for a reason this version does not know; into buf (n
 * bytes), which it returns. */
const char *moment_of(const struct snapshot *s, char *buf, size_t n);

/* Whether a and b were written by one process (same pid and start time,
 * both known), not both at its exit: two dumps of one run. */
bool moment_same_run(const struct snapshot *a, const struct snapshot *b);

#endif
