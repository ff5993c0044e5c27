/* report_allocator.h - the post-mortem in the caching allocator's terms
 * (PyTorch: allocated vs reserved vs unallocated, the largest free block),
 * from oom.allocator - what the driver-level figures cannot tell. */
#ifndef CUMEMTRACE_CLI_REPORT_ALLOCATOR_H
#define CUMEMTRACE_CLI_REPORT_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snapshot.h"

/* The allocator as a sentence names it: "PyTorch" for ours, else "the
 * allocator" ("The allocator" when `capital`, opening a sentence). */
const char *report_allocator_who(const struct snap_allocator *a, bool capital);

/* The largest free block of the allocator's pools, SNAP_UNKNOWN when
 * neither pool's was said. */
uint64_t report_allocator_largest_free(const struct snap_allocator *a);

/* The bytes the allocator was asked for, else the failing call's. */
uint64_t report_allocator_request(const struct snap_oom *o);

/* The allocator's figures as labelled post-mortem lines; nothing when the
 * allocator did not speak. */
void report_allocator_lines(FILE *f, struct snapctx *ctx, const struct snap_oom *o);

/* PyTorch's max_memory_allocated for device d of s - the most its tensors
 * held at once, beside the device's peak, which counts what it reserved -
 * from the device's latest allocator state, else from the post-mortem of an
 * OOM on that device; SNAP_UNKNOWN when PyTorch did not say. */
uint64_t report_allocator_peak(const struct snapshot *s, const struct snap_device *d);

/* The training step during which device d's peak was reached (PyTorch's
 * layer, peak_step), SNAP_UNKNOWN_I64 when not known. */
int64_t report_allocator_peak_step(const struct snapshot *s, const struct snap_device *d);

/* The Python lines holding the largest live tensors (PyTorch's history,
 * `top_tensors`), up to `lines` lines each (the callers cut to fit), the
 * first prefixed by `first`, the others by `rest`; nothing when the
 * allocator kept no history. */
void report_allocator_tensors(FILE *f, struct snapctx *ctx, const struct snap_allocator *a,
                              const char *first, const char *rest, int lines);

/* Whose PyTorch's allocated bytes are (`roles`): parameters, buffers,
 * gradients, optimizer state, other tensors, then the cache (reserved -
 * allocated), as one sentence into buf; "" when not measured.  Returns buf. */
const char *report_allocator_roles_text(const struct snap_allocator *a, char *buf, size_t n);

/* The same as a labelled line (first / rest as for out_wrap); nothing when
 * not measured. */
void report_allocator_roles(FILE *f, const struct snap_allocator *a, const char *first,
                            const char *rest);

/* How old the allocator's figures `a` of snapshot s are, as one sentence
 * into buf, when that matters: the dump asked PyTorch's layer for fresh
 * figures and it did not answer in time (allocator_refresh), or the
 * figures were read 1 s or more before the dump (a stream's checkpoint, a
 * device's state in a post-mortem); "" otherwise.  Returns buf. */
const char *report_allocator_age(const struct snapshot *s, const struct snap_allocator *a,
                                 char *buf, size_t n);

/* When something happened, in the program's terms, from its phase (an id
 * of the file's phases) and PyTorch's training step (SNAP_UNKNOWN_I64 when
 * unknown): "backward of module `layers.2`, step 3" for PyTorch's phases
 * (source "torch"), "range `validation/step 1200`" for others; "" when
 * neither is known.  Step 0 reads "before the first optimizer step".  Text shown as snapshot_display shows it.  Returns buf. */
const char *report_allocator_when(const struct snapshot *s, int64_t phase, int64_t step,
                                  char *buf, size_t n);

#endif
