/* layout.h - the address layout of one device's live allocations, for the
 * OOM post-mortem (oom.layout in docs/snapshot-format.md). */
#ifndef CUMEMTRACE_LAYOUT_H
#define CUMEMTRACE_LAYOUT_H

#include <stdint.h>

#include "snapshot_json.h"

/* Writes the layout of `device`'s live allocations for a failed request of
 * `requested` bytes as one JSON value: an object, or null for host memory
 * (device < 0).  With `allocator_tag` >= 0 (the caching allocator's num_ooms
 * in the post-mortem's facts) it includes the segments that allocator
 * reported with that tag (allocator_segments.c).  Allocates a copy of the
 * ranges (falls back to null when it cannot); no CUDA calls. */
void layout_write(int device, uint64_t requested, int64_t allocator_tag,
                  struct snapshot_json *w);

#endif
