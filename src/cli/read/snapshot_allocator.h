/* snapshot_allocator.h - reading oom.allocator, the caching allocator's own
 * view at an OOM (docs/snapshot-format.md). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_ALLOCATOR_H
#define CUMEMTRACE_CLI_SNAPSHOT_ALLOCATOR_H

#include "reader.h"

/* A field function of the oom table: obj is the struct snap_oom. */
int snapshot_read_allocator(struct reader *r, void *obj);

/* The same for devices[].allocator, the latest state (obj: snap_device). */
int snapshot_read_device_allocator(struct reader *r, void *obj);

#endif
