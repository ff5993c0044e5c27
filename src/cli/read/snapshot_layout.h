/* snapshot_layout.h - reading and checking oom.layout, the address layout of
 * the failing device's live allocations, and the caching allocator's
 * segments (oom.layout.allocator_segments, devices[].allocator_segments;
 * docs/snapshot-format.md). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_LAYOUT_H
#define CUMEMTRACE_CLI_SNAPSHOT_LAYOUT_H

#include "errors.h"
#include "reader.h"
#include "snapshot.h"

/* A field function of the oom table: obj is the struct snap_oom. */
int snapshot_read_layout(struct reader *r, void *obj);

/* A field function of the devices table: obj is the struct snap_device,
 * the field its allocator_segments. */
int snapshot_read_device_segments(struct reader *r, void *obj);

/* Resolves the layout's stack ids and checks its invariants and those of
 * every device's allocator_segments (a no-op without them).  Returns 0 or a CLI_E* code with err set. */
int snapshot_layout_check(struct snapshot *s, struct cli_error *err);

#endif
