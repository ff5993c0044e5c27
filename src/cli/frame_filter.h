/* frame_filter.h - which frames the views show (issue 15): by default the
 * interpreter's own frames and process start-up are folded away, since the
 * Python frames stand for them and every stack ends in start-up;
 * --all-frames keeps them, --hide REGEX drops frames whose name matches
 * (pprof's --hide), --python-only / --native-only keep one kind.  Applied
 * when a snapshot is read, so every view (report, diff, flamegraph,
 * timeline, html, export) sees the same stacks.  A stack never loses its
 * last frame to a filter. */
#ifndef CUMEMTRACE_CLI_FRAME_FILTER_H
#define CUMEMTRACE_CLI_FRAME_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* Takes the filter options out of argv (they may stand anywhere before the
 * files) and sets the process-wide filter.  Returns 0, or the exit status
 * of a usage error already printed (a bad regular expression). */
int frame_filter_args(const char *cmd, int *argc, char **argv);

/* Filters frames[0..n) of a stack in place; returns the new count. */
size_t frame_filter_apply(const struct snapctx *ctx, uint32_t *frames, size_t n);

#endif
