/* snapshot_phases.h - the program's phases in a snapshot: reading the
 * "phases" section and each device's "by_phase", their checks, and the
 * look-ups the views share (snapshot_phases.c, docs/snapshot-format.md). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_PHASES_H
#define CUMEMTRACE_CLI_SNAPSHOT_PHASES_H

#include "errors.h"
#include "reader.h"
#include "snapshot.h"

/* Field readers: the top-level "phases" (obj: the snapshot) and a pool's
 * "by_phase" (obj: struct snap_phase_rows). */
int snapshot_read_phases(struct reader *r, void *obj);
int snapshot_read_by_phase(struct reader *r, void *obj);

/* Resolves the rows' stacks and checks "phases: at_peak_bytes sum to
 * peak_bytes"; 0 or the CLI_E* code with err set. */
int snapshot_phases_check(struct snapshot *s, struct cli_error *err);

/* The phase of that id, or NULL (0, unknown). */
const struct snap_phase *snapshot_phase(const struct snapshot *s, int64_t id);
/* Its path, "validation/step 1200" ("(outside every range)" for 0, "?" for
 * an id the file does not list). */
const char *snapshot_phase_path(const struct snapshot *s, int64_t id);

#endif
