/* allocator_tensors.h - PyTorch's live tensors by the user's line, as the
 * layer handed them over (life/torch_protocol.h), kept for the writer. */
#ifndef CUMEMTRACE_ALLOCATOR_TENSORS_H
#define CUMEMTRACE_ALLOCATOR_TENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator_segments.h"

enum allocator_tensors_member {
    ALLOCATOR_TENSORS = 0,  /* "tensors" */
    ALLOCATOR_PEAK_TENSORS, /* "peak_tensors" */
    ALLOCATOR_GROWTH,       /* "growth" */
    ALLOCATOR_SERIES,       /* "tensor_series" */
    ALLOCATOR_DEVICE_MEMBERS, /* those above are a device's; those below an OOM's */
    ALLOCATOR_ORIGIN = ALLOCATOR_DEVICE_MEMBERS, /* "origin": the failing
                                                    request's autograd node */
    ALLOCATOR_TENSORS_MEMBERS
};

/* The JSON names of the members, by enum allocator_tensors_member. */
extern const char *const allocator_tensors_names[ALLOCATOR_TENSORS_MEMBERS];

/* Writes member `m` of the object `device`'s layer handed over with `tag`
 * (CUMEMTRACE_LAYOUT_STATE: the latest state) as one JSON value: the
 * text as handed, or null when there is none or it lacked the member. */
void allocator_tensors_write(int device, int64_t tag, enum allocator_tensors_member m,
                             struct snapshot_json *w);

/* Whether `json[0..len)` is one well-formed JSON object of valid UTF-8,
 * nested at most 64 deep, whose members are among the names above, each
 * once; with out non-NULL, the value of each member as [start, end) offsets
 * (start == end: absent). */
bool allocator_tensors_check(const char *json, size_t len,
                             size_t out[ALLOCATOR_TENSORS_MEMBERS][2]);

/* fork(): the child forgets the parent's reports. */
void allocator_tensors_atfork_child(void);

#endif
