/* snapshot_tensors.h - reading PyTorch's live blocks by the user's line:
 * devices[].tensors, peak_tensors, growth and oom.allocator.tensors
 * (docs/snapshot-format.md). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_TENSORS_H
#define CUMEMTRACE_CLI_SNAPSHOT_TENSORS_H

#include "reader.h"

/* Field functions: obj is the struct snap_device, or the snap_allocator
 * (oom.allocator.tensors). */
int snapshot_read_device_tensors(struct reader *r, void *obj);
int snapshot_read_device_peak_tensors(struct reader *r, void *obj);
int snapshot_read_device_growth(struct reader *r, void *obj);
int snapshot_read_device_series(struct reader *r, void *obj);
int snapshot_read_allocator_tensors(struct reader *r, void *obj);
/* null, or {thread, node, forward_site} into a struct snap_origin (thread
 * NULL for null): a group's origin, and oom.allocator.origin. */
int snapshot_read_origin(struct reader *r, void *obj);

/* The invariants of the tensor members (docs/snapshot-format.md): each
 * object's groups and `more` sum to its allocated_bytes and count, and its
 * allocated_bytes is the allocator's own (allocated_bytes; for
 * peak_tensors max_memory_allocated) where the file has both.  0, or the
 * error (snapshot_broken). */
int snapshot_tensors_check(const struct snapshot *s, struct cli_error *err);

#endif
