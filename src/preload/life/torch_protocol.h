/* torch_protocol.h - entry points only cumemtrace's own PyTorch layer
 * (src/torchboot) calls, through ctypes.  Not the user's API
 * (include/cumemtrace.h): their shape follows the layer, which ships with
 * this library, and may change with it.  Exported by exports.map.in. */
#ifndef CUMEMTRACE_TORCH_PROTOCOL_H
#define CUMEMTRACE_TORCH_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

/* PyTorch's live tensors grouped by the user's line, handed over as JSON
 * text: one object whose members are among "tensors", "peak_tensors" and
 * "growth" (docs/snapshot-format.md, devices[]), each at most once.  `tag`
 * as cumemtrace_allocator_layout's: CUMEMTRACE_LAYOUT_STATE (-1) for the
 * device's latest state, written as devices[].tensors/peak_tensors/growth
 * in every later snapshot; or an OOM's num_ooms, whose post-mortem writes
 * the object's "tensors" as oom.allocator.tensors.  The library copies the
 * text (at most TORCH_TENSORS_MAX bytes) and writes each member verbatim,
 * so it refuses anything that is not one well-formed JSON object of valid
 * UTF-8 nested at most 64 deep.  Returns 0, or -1 (bad arguments, a text
 * refused, out of memory, tracing disabled).  Thread-safe. */
#define TORCH_TENSORS_MAX (16u << 20)
int cumemtrace_allocator_tensors(int device, int64_t tag, const char *json, size_t len);

#endif
