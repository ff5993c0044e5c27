/* format.h - the snapshot and stream formats' vocabulary, written once: the
 * writer (src/preload/write) and the reader (src/cli/read) both take their
 * kinds, causes, versions and magic numbers from here, so the two cannot disagree
 * (docs/snapshot-format.md and docs/stream-format.md describe the fields;
 * tests/e2e/test_format.py checks that each name here is written and
 * read).
 */
#ifndef CUMEMTRACE_FORMAT_H
#define CUMEMTRACE_FORMAT_H

#include <stddef.h>

#include "cumemtrace.h"

/* The tool's version, "MAJOR.MINOR.PATCH" from include/cumemtrace.h: the
 * library, the command and the snapshots they write carry the same one. */
#define FORMAT_STR_(x) #x
#define FORMAT_STR(x) FORMAT_STR_(x)
#define FORMAT_TOOL_VERSION                                                    \
    FORMAT_STR(CUMEMTRACE_VERSION_MAJOR) "." FORMAT_STR(CUMEMTRACE_VERSION_MINOR) \
    "." FORMAT_STR(CUMEMTRACE_VERSION_PATCH)

/* The snapshot document's "version": the writer writes it, the reader
 * reads it (the first release's; none before it was released). */
#define FORMAT_VERSION 1

/* A stream file (stream.c, stream_read.c): 8 bytes of file magic, then
 * records each opening with RECORD_MAGIC ("CMTR" little-endian), checksummed
 * with CRC-32C; its header record's "version" is the first release's, the
 * only one the reader reads (version 1 was never released). */
#define FORMAT_STREAM_MAGIC "CMTSTRM1"
#define FORMAT_STREAM_RECORD_MAGIC 0x52544d43u
#define FORMAT_STREAM_VERSION 2

/* The kinds of memory, in the order the tracker numbers them and the
 * snapshot lists them, one row each: X(suffix of KIND_*, name in the
 * snapshot, on_device, with_context, placed, what the command's prose calls
 * it), where
 *   on_device     counted on a device (the others are host memory: a
 *                 device's "by_kind" holds these, host_pinned has a section
 *                 of its own);
 *   with_context  freed with the context that made it (a destroyed or reset
 *                 context's memory is forgotten; stream-ordered pools and VMM
 *                 handles belong to no context, NVIDIA's cuCtxDestroy);
 *   placed        at an address the driver chose for it, so an OOM's address
 *                 layout shows it (managed and VMM pages need no contiguity).
 * A new kind is a new line here (docs/design.md lists what else it
 * touches); code asks these columns (FORMAT_KIND_ON_HOST and below), never
 * for a kind by name. */
#define FORMAT_KINDS(X)                                                \
    X(DEVICE, "device", 1, 1, 1, "device memory")                      \
    X(MANAGED, "managed", 1, 1, 0, "managed memory")                   \
    X(ASYNC, "async", 1, 0, 1, "stream-ordered (async) memory")        \
    X(VMM, "vmm", 1, 0, 0, "VMM physical memory")                      \
    X(HOST_PINNED, "host_pinned", 0, 1, 0, "pinned host memory")

/* How many kinds are counted on a device (the by_kind keys).  They come
 * first: both sides index arrays of FORMAT_DEVICE_KINDS by kind. */
#define FORMAT_KIND_ON_DEVICE_(sym, name, dev, ctx, placed, phrase) +(dev)
#define FORMAT_KIND_INDEX_(sym, name, dev, ctx, placed, phrase) FORMAT_KIND_INDEX_##sym,
enum format_kind_index_ {
    FORMAT_KINDS(FORMAT_KIND_INDEX_)
    FORMAT_DEVICE_KINDS = 0 FORMAT_KINDS(FORMAT_KIND_ON_DEVICE_)
};
#define FORMAT_KIND_MISPLACED_(sym, name, dev, ctx, placed, phrase) \
    +((dev) != (FORMAT_KIND_INDEX_##sym < FORMAT_DEVICE_KINDS))
_Static_assert((0 FORMAT_KINDS(FORMAT_KIND_MISPLACED_)) == 0,
               "the kinds counted on a device come first in FORMAT_KINDS");

/* The columns as bit masks, a bit per kind index: asking one is a shift of a
 * constant, folded where the kind is a constant (the hot path's wrappers). */
#define FORMAT_KIND_BIT_HOST_(sym, name, dev, ctx, placed, phrase) \
    | ((unsigned)!(dev) << FORMAT_KIND_INDEX_##sym)
#define FORMAT_KIND_BIT_CONTEXT_(sym, name, dev, ctx, placed, phrase) \
    | ((unsigned)(ctx) << FORMAT_KIND_INDEX_##sym)
#define FORMAT_KIND_BIT_PLACED_(sym, name, dev, ctx, placed, phrase) \
    | ((unsigned)(placed) << FORMAT_KIND_INDEX_##sym)
#define FORMAT_KINDS_ON_HOST (0u FORMAT_KINDS(FORMAT_KIND_BIT_HOST_))
#define FORMAT_KINDS_WITH_CONTEXT (0u FORMAT_KINDS(FORMAT_KIND_BIT_CONTEXT_))
#define FORMAT_KINDS_PLACED (0u FORMAT_KINDS(FORMAT_KIND_BIT_PLACED_))
/* Whether kind index k is host memory, freed with its context, placed by
 * the driver (0 for an index past the table: a reader's unknown kind). */
#define FORMAT_KIND_ON_HOST(k) ((FORMAT_KINDS_ON_HOST >> (unsigned)(k)) & 1u)
#define FORMAT_KIND_WITH_CONTEXT(k) ((FORMAT_KINDS_WITH_CONTEXT >> (unsigned)(k)) & 1u)
#define FORMAT_KIND_PLACED(k) ((FORMAT_KINDS_PLACED >> (unsigned)(k)) & 1u)

/* FORMAT_IF_ON_DEVICE(on_device, text): text for a kind counted on a
 * device, nothing otherwise (tables of the by_kind keys). */
#define FORMAT_IF_ON_DEVICE(dev, ...) FORMAT_IF_ON_DEVICE_##dev(__VA_ARGS__)
#define FORMAT_IF_ON_DEVICE_1(...) __VA_ARGS__
#define FORMAT_IF_ON_DEVICE_0(...)

/* Why a request failed, the post-mortem's "cause": X(suffix of
 * FORMAT_CAUSE_*, name in the snapshot), generated by the build from the
 * rows of src/cli/text/oom_causes.c, where each cause's words are (the
 * Makefile, scripts/causes.awk).  docs/snapshot-format.md says what each
 * means; the writer classifies (oom_ledger.c, allocator.c). */
#include "causes.h"

#define FORMAT_CAUSE_ENUM_(sym, name) FORMAT_CAUSE_##sym,
enum format_cause {
    FORMAT_CAUSE_NONE, /* not classified (a reader: a name it does not know) */
    FORMAT_CAUSES(FORMAT_CAUSE_ENUM_)
    FORMAT_CAUSE_COUNT
};
#undef FORMAT_CAUSE_ENUM_

/* The snapshot's name of a cause; NULL for FORMAT_CAUSE_NONE. */
static inline const char *format_cause_name(enum format_cause c)
{
#define FORMAT_CAUSE_CASE_(sym, name) \
    case FORMAT_CAUSE_##sym:          \
        return name;
    switch (c) {
        FORMAT_CAUSES(FORMAT_CAUSE_CASE_)
    default:
        return NULL;
    }
#undef FORMAT_CAUSE_CASE_
}

#endif
