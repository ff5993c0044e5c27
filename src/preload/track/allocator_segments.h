/* allocator_segments.h - the caching allocator's segments and blocks at its
 * OOM (cumemtrace_allocator_layout in life/torch_protocol.h), kept
 * for the post-mortem's oom.layout.allocator_segments, and at the exit, for
 * devices[].allocator_segments. */
#ifndef CUMEMTRACE_ALLOCATOR_SEGMENTS_H
#define CUMEMTRACE_ALLOCATOR_SEGMENTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "snapshot_json.h"

/* Writes the segments `device`'s allocator reported with `tag` as one JSON
 * value: an object, or null when the latest report has another tag (or
 * there is none).  No CUDA calls. */
void allocator_segments_write(int device, int64_t tag, struct snapshot_json *w);

/* The same for the latest CUMEMTRACE_LAYOUT_STATE report of `device`
 * (devices[].allocator_segments), null when none. */
void allocator_segments_write_state(int device, struct snapshot_json *w);

/* One stack's "file:line:function" lines (NUL-terminated) as a JSON array
 * of {file, line, function}; a line without both colons is left out. */
void allocator_segments_write_stack(const char *text, struct snapshot_json *w);

/* Reports kept per device, by tag: a post-mortem rewritten after a few
 * later OOMs (its chain ended, or at exit) still finds its own. */
#define ALLOCATOR_KEPT 4

/* Reports of the PyTorch layer (layouts, tensors): malloc'ed blocks that
 * begin with their int64_t tag; kept[d][0] the latest.  Guarded by lock. */
struct allocator_kept {
    pthread_mutex_t lock;
    void *kept[RECORD_MAX_DEVICES][ALLOCATOR_KEPT];
    void *state[RECORD_MAX_DEVICES];
};

/* Keeps report r for device (0 <= device < RECORD_MAX_DEVICES), taking
 * k->lock; a kept report with the same tag, or else the oldest, is freed. */
void allocator_kept_put(struct allocator_kept *k, int device, void *r);

/* The report of device with tag (CUMEMTRACE_LAYOUT_STATE: the latest state),
 * NULL when none; the caller holds k->lock while it reads it. */
const void *allocator_kept_find(struct allocator_kept *k, int device, int64_t tag);

/* fork(): the child forgets the reports, and the lock is made anew. */
void allocator_kept_clear(struct allocator_kept *k);

/* fork(): the child forgets the parent's reports (its allocator's state is
 * the parent's copy, but no OOM of the child's has spoken yet). */
void allocator_segments_atfork_child(void);

#endif
