/* snapshot_tensors.h - reading PyTorch's live blocks by the user's line:
 * devices[].tensors, peak_tensors, growth, tensor_series and
 * oom.allocator.tensors, and a group's or oom.allocator's origin
 * (docs/snapshot-format.md). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_TENSORS_H
#define CUMEMTRACE_CLI_SNAPSHOT_TENSORS_H

#include "reader.h"

/* Nested values of snapshot.h's tables (TENSORS, PEAK_TENSORS, GROWTH,
 * SERIES, ORIGIN rows): each reads an object or null into the member obj points at, which
 * the caller zeroed; null leaves it absent (present false, thread NULL). */
int snapshot_read_tensors(struct reader *r, void *obj);
int snapshot_read_peak_tensors(struct reader *r, void *obj);
int snapshot_read_growth(struct reader *r, void *obj);
int snapshot_read_series(struct reader *r, void *obj);
int snapshot_read_origin(struct reader *r, void *obj);

/* The invariants of the tensor members (docs/snapshot-format.md): each
 * object's groups and `more` sum to its allocated_bytes and count, and its
 * allocated_bytes is the allocator's own (allocated_bytes; for
 * peak_tensors max_memory_allocated) where the file has both.  0, or the
 * error (snapshot_broken). */
int snapshot_tensors_check(const struct snapshot *s, struct cli_error *err);

#endif
