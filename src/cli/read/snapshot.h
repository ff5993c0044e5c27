/* snapshot.h - the in-memory model of a snapshot (docs/snapshot-format.md).
 *
 * One struct snapshot per file; the strings, frames and call-site tables of
 * every snapshot loaded together live in one struct snapctx, so that the
 * same frame name is the same pointer in two files (diff matches call sites
 * by pointer equality).
 *
 * Unknown values: the format writes null for what the library did not know.
 * Such a field holds SNAP_UNKNOWN (unsigned) or SNAP_UNKNOWN_I64 (signed),
 * and views print "?" rather than a made-up number.
 */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_H
#define CUMEMTRACE_CLI_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "format.h"
#include "hmap.h"

#define SNAP_FORMAT_VERSION FORMAT_VERSION /* the newest version this tool reads */

#define SNAP_UNKNOWN UINT64_MAX
#define SNAP_UNKNOWN_I64 INT64_MIN
#define SNAP_NO_STACK UINT32_MAX /* a group or event without a stack */

/* Whether the file knew figure v (it is not SNAP_UNKNOWN). */
static inline bool snap_known(uint64_t v)
{
    return v != SNAP_UNKNOWN;
}

/* The format's sections as tables (docs/snapshot-format.md), one row a key,
 * each beside the struct it fills (here, or in the reader that owns it):
 *     X(struct, key, member, type, json)
 * The readers read `key` into `member` as `type` (reader.h's F_*; GROUPS,
 * PHASE_ROWS: call-site groups, by_phase rows; FN: another nested value,
 * `member` names its reader; ARRAY, LIST: an array (LIST: or null),
 * `member` names the reader of an element; KIND: a kind's name or null;
 * OBJECT, OPTIONAL: an object (OPTIONAL: or null, the member's present
 * says which) read by the table member##_fields; FLAG: an object or null
 * read into the struct itself by the table key##_fields, `member` the
 * bool that says which; SKIP: written for others, passed over);
 * `report --json` prints the rows whose `json` is 1, 2, 3 in runs of
 * that number, its own keys between them.  The build refuses a member whose
 * C type is not its row's; tests/e2e/test_schema.py holds the writer and
 * docs/snapshot-format.md to the tables. */

enum snap_kind {
#define SNAP_KIND_ENUM(sym, name, on_device, with_context, placed, phrase) KIND_##sym,
    FORMAT_KINDS(SNAP_KIND_ENUM) /* format.h's table, as the writer's */
#undef SNAP_KIND_ENUM
    KIND_OTHER, /* a kind name this version does not know */
    KIND_COUNT
};
#define DEVICE_KINDS FORMAT_DEVICE_KINDS /* the by_kind keys: device, managed, async, vmm */

/* format.h's causes, as the writer's. */
#define SNAP_CAUSE_ENUM(sym, name) CAUSE_##sym = FORMAT_CAUSE_##sym,
enum oom_cause {
    CAUSE_UNKNOWN = FORMAT_CAUSE_NONE, /* a name this version does not know */
    FORMAT_CAUSES(SNAP_CAUSE_ENUM)
};
#undef SNAP_CAUSE_ENUM

enum frame_type { FRAME_NATIVE, FRAME_PYTHON, FRAME_MARKER };

/* A distinct frame (after naming: two frames that print the same are one). */
struct frame {
    const char *name;   /* module!symbol, module+0xoff, file:line:func, [marker] */
    const char *display; /* name as text views print it: a Python file by its
                            basename (the full path stays the identity) */
    const char *module; /* native: module basename; python: the file; marker: NULL */
    uint8_t type;       /* enum frame_type */
    bool named;         /* python, or native with a symbol */
    uint8_t shown;      /* frame_filter.c's verdict, 0 until it is asked */
};

/* Grouping of call sites, the --by option of diff. */
enum site_by { BY_STACK, BY_FUNCTION, BY_MODULE, BY_COUNT };

/* A call site under one grouping: what views print and diff matches. */
struct site {
    const char *label;      /* the frame (or module) that names the site */
    const char *display;    /* label as text views print it (frame.display) */
    uint32_t stack;         /* a stack of the site (index in its snapshot), for the chain */
    const struct snapshot *snap; /* the snapshot that stack belongs to */
};

struct snap_stack {
    int64_t id;          /* as in the file, >= 1 */
    const char *entry;   /* CUDA entry point, e.g. "cudaMalloc" */
    uint32_t *frames;    /* frame indices in snapctx, innermost first */
    uint32_t nframes;
    uint32_t site[BY_COUNT]; /* site ids, computed on first use */
    bool unfocused;      /* --focus is given and no frame matches it */
};
#define SNAP_STACK_SCHEMA(X) /* stacks[] */ \
    X(snap_stack, id, id, I64, 0)           \
    X(snap_stack, entry, entry, STRN, 0)    \
    X(snap_stack, frames, rd_frames, FN, 0)

/* Allocations grouped by call site (live, at_peak, oom.live). */
struct snap_group {
    int64_t stack_id; /* as in the file */
    uint32_t stack;   /* index into snapshot.stacks, or SNAP_NO_STACK */
    uint8_t kind;     /* enum snap_kind; KIND_DEVICE when the file omits it */
    uint64_t bytes;
    uint64_t count;
    uint64_t frees, temporary; /* churn rows only (bytes: allocated, count: allocs) */
};
#define SNAP_GROUP_STACK_SCHEMA(X) /* every group's */ \
    X(snap_group, stack, stack_id, I64N, 0)
#define SNAP_GROUP_SCHEMA(X) /* live[], at_peak[], oom.live[], oom.released[] */ \
    X(snap_group, bytes, bytes, U64, 0)                                        \
    X(snap_group, count, count, U64, 0)
#define SNAP_GROUP_KIND_SCHEMA(X) /* live[], oom.live[]: the kind, else device */ \
    X(snap_group, kind, kind, KIND, 0)
#define SNAP_PHASE_TOP_SCHEMA(X) /* by_phase[].top_at_peak[]: the stack's, then */ \
    X(snap_group, bytes, bytes, U64, 1)
#define SNAP_CHURN_SCHEMA(X) /* churn[] */                 \
    X(snap_group, allocs, count, U64, 1)                  \
    X(snap_group, frees, frees, U64, 1)                   \
    X(snap_group, bytes_allocated, bytes, U64, 1)         \
    X(snap_group, temporary, temporary, U64, 1)

struct snap_groups {
    struct snap_group *v;
    size_t n, cap;
    bool present; /* the file had the array (not missing, not null) */
};

struct snap_kind_stats {
    uint64_t current_bytes, peak_bytes, allocs, frees, failures;
    int64_t peak_time_ns;
};
#define SNAP_KIND_STATS_SCHEMA(X) /* a by_kind entry; host_pinned's own figures */ \
    X(snap_kind_stats, current_bytes, current_bytes, U64, 1)                       \
    X(snap_kind_stats, peak_bytes, peak_bytes, U64, 1)                             \
    X(snap_kind_stats, peak_time_ns, peak_time_ns, I64N, 1)                        \
    X(snap_kind_stats, allocs, allocs, U64, 1)                                     \
    X(snap_kind_stats, frees, frees, U64, 1)                                       \
    X(snap_kind_stats, failures, failures, U64, 1)

struct snap_vmm {
    bool present;
    uint64_t reserved_bytes, mapped_bytes, physical_bytes;
    uint64_t reserved_peak_bytes, mapped_peak_bytes;
};
#define SNAP_VMM_SCHEMA(X) /* devices[].vmm */                    \
    X(snap_vmm, reserved_bytes, reserved_bytes, U64, 1)           \
    X(snap_vmm, mapped_bytes, mapped_bytes, U64, 1)               \
    X(snap_vmm, physical_bytes, physical_bytes, U64, 1)           \
    X(snap_vmm, reserved_peak_bytes, reserved_peak_bytes, U64, 1) \
    X(snap_vmm, mapped_peak_bytes, mapped_peak_bytes, U64, 1)

struct snap_frag {
    bool present;
    uint64_t granularity_bytes, requested_bytes, rounded_bytes;
    uint64_t small_count, small_bytes;
};
#define SNAP_FRAG_SCHEMA(X) /* devices[].fragmentation; json 1, waste_bytes, 2 */ \
    X(snap_frag, granularity_bytes, granularity_bytes, U64N, 1)                   \
    X(snap_frag, requested_bytes, requested_bytes, U64, 1)                        \
    X(snap_frag, rounded_bytes, rounded_bytes, U64, 1)                            \
    X(snap_frag, small_count, small_count, U64, 2)                                \
    X(snap_frag, small_bytes, small_bytes, U64, 2)

struct snap_bucket {
    uint64_t le, count, bytes;
};
#define SNAP_BUCKET_SCHEMA(X) /* devices[].histogram[] */ \
    X(snap_bucket, le, le, U64, 1)                        \
    X(snap_bucket, count, count, U64, 1)                  \
    X(snap_bucket, bytes, bytes, U64, 1)

/* PyTorch's live blocks (active_allocated) grouped by the first frame in
 * the user's own code: a device's `tensors` (at the dump), `peak_tensors`
 * (at max_memory_allocated), `oom.allocator.tensors` (at the failure), and
 * the rows of `growth` (docs/snapshot-format.md). */
#define SNAP_NO_FRAME UINT32_MAX /* no frame (frames.h's FRAMES_NONE) */

/* Who made blocks on autograd's backward thread (a group's origin,
 * oom.allocator.origin: the failing request's): the thread ("backward"),
 * the node ("MmBackward0", NULL: not known) and the node's forward line
 * (SNAP_NO_FRAME: PyTorch did not keep it); thread NULL when the file has
 * none (null). */
struct snap_origin {
    const char *thread, *node;
    uint32_t forward_site;
};
#define SNAP_ORIGIN_SCHEMA(X) /* a group's origin, oom.allocator.origin; json 1, forward_line */ \
    X(snap_origin, thread, thread, STRN, 1)                                                  \
    X(snap_origin, node, node, STRN, 1)                                                      \
    X(snap_origin, forward_site, rd_forward_site, FN, 0)

struct snap_tgroup {
    uint32_t site;      /* frame index in snapctx of the user's frame, the
                           group's identity ("file:line:function");
                           SNAP_NO_FRAME when the stack has none */
    const uint32_t *frames; /* the stack as shown (--hide, --python-only
                               applied), innermost first, frame indices */
    uint32_t nframes;
    const uint32_t *recorded; /* the stack as written, before any filter */
    uint32_t nrecorded;
    uint32_t label;     /* the frame the views name the group by: the site,
                           or where --hide dropped it the next shown frame
                           outward (SNAP_NO_FRAME: none) */
    bool unfocused;     /* --focus is given and no frame of the stack matches */
    uint64_t bytes, count;
    struct snap_origin origin; /* blocks made on autograd's backward thread */
    /* growth rows only: live bytes added a step, over steps
     * first_step..last_step (steps of them); SNAP_UNKNOWN(_I64) else */
    uint64_t bytes_per_step, steps;
    int64_t first_step, last_step;
};
#define SNAP_TGROUP_SCHEMA(X) /* tensors.groups[] */ \
    X(snap_tgroup, site, rd_site, FN, 0)        \
    X(snap_tgroup, stack, rd_stack, FN, 0)      \
    X(snap_tgroup, bytes, bytes, U64, 0)        \
    X(snap_tgroup, count, count, U64, 0)        \
    X(snap_tgroup, origin, origin, ORIGIN, 0)
#define SNAP_GROWTH_SCHEMA(X) /* devices[].growth[] */             \
    X(snap_tgroup, site, rd_site, FN, 0)                          \
    X(snap_tgroup, stack, rd_stack, FN, 0)                        \
    X(snap_tgroup, bytes, bytes, U64, 0)                          \
    X(snap_tgroup, bytes_per_step, bytes_per_step, U64N, 1)       \
    X(snap_tgroup, first_step, first_step, I64N, 1)               \
    X(snap_tgroup, last_step, last_step, I64N, 1)                 \
    X(snap_tgroup, steps, steps, U64N, 1)

struct snap_tensors {
    bool present; /* the member was an object (null: PyTorch's layer did not read them) */
    uint64_t allocated_bytes, count; /* PyTorch's allocated_bytes, live blocks */
    struct snap_tgroup *v; /* largest bytes first */
    size_t n, cap;
    bool has_more;  /* the writer folded a tail of groups */
    uint64_t more_groups, more_bytes, more_count;
    bool has_cache; /* PyTorch's cache: reserved - allocated */
    uint64_t cache_bytes, cache_segments, cache_largest_free;
    int64_t time_ns, step; /* peak_tensors only: when; SNAP_UNKNOWN_I64 */
};
#define SNAP_TENSORS_SCHEMA(X) /* devices[].tensors, oom.allocator.tensors */ \
    X(snap_tensors, allocated_bytes, allocated_bytes, U64, 0)                \
    X(snap_tensors, count, count, U64, 0)                                    \
    X(snap_tensors, groups, rd_group, ARRAY, 0)                              \
    X(snap_tensors, more, has_more, FLAG, 0)                                 \
    X(snap_tensors, cache, has_cache, FLAG, 0)
#define SNAP_PEAK_TENSORS_SCHEMA(X) /* peak_tensors: SNAP_TENSORS_SCHEMA's keys, then */ \
    X(snap_tensors, time_ns, time_ns, I64N, 0)                                          \
    X(snap_tensors, step, step, I64N, 0)                                                \
    X(snap_tensors, time_unix_us, none, SKIP, 0)
#define SNAP_TENSORS_MORE_SCHEMA(X) /* tensors.more: the groups folded */ \
    X(snap_tensors, groups, more_groups, U64, 0)                         \
    X(snap_tensors, bytes, more_bytes, U64, 0)                           \
    X(snap_tensors, count, more_count, U64, 0)
#define SNAP_TENSORS_CACHE_SCHEMA(X) /* tensors.cache */                     \
    X(snap_tensors, bytes, cache_bytes, U64, 0)                             \
    X(snap_tensors, segments, cache_segments, U64N, 0)                      \
    X(snap_tensors, largest_free_bytes, cache_largest_free, U64N, 0)

/* devices[].tensor_series: PyTorch's tensors by line at the layer's
 * readings between dumps (docs/snapshot-format.md): lines[j] the frame of
 * line j (its site; SNAP_NO_FRAME: the blocks with no user frame), each
 * reading's bytes[j] what that line held then. */
struct snap_sreading {
    int64_t step, time_ns; /* time_ns SNAP_UNKNOWN_I64: not timed */
    uint64_t allocated_bytes, reserved_bytes, other_bytes;
    uint64_t *bytes; /* nbytes == the series' nlines */
    size_t nbytes, cap;
};
#define SNAP_SREADING_SCHEMA(X) /* tensor_series.readings[] */ \
    X(snap_sreading, step, step, I64N, 0)                        \
    X(snap_sreading, time_ns, time_ns, I64N, 0)                  \
    X(snap_sreading, allocated_bytes, allocated_bytes, U64, 0)   \
    X(snap_sreading, reserved_bytes, reserved_bytes, U64N, 0)    \
    X(snap_sreading, bytes, rd_reading_byte, ARRAY, 0)           \
    X(snap_sreading, other_bytes, other_bytes, U64, 0)

struct snap_series {
    bool present;
    uint32_t *lines;
    size_t nlines, lines_cap;
    struct snap_sreading *v; /* in the order read: oldest first */
    size_t n, cap;
};
#define SNAP_SERIES_SCHEMA(X) /* devices[].tensor_series */ \
    X(snap_series, lines, rd_series_line, ARRAY, 0)            \
    X(snap_series, readings, rd_series_reading, ARRAY, 0)

struct snap_growth {
    bool present; /* growth was an array (null: not measured) */
    struct snap_tgroup *v; /* largest bytes_per_step first */
    size_t n, cap;
};

/* oom.allocator: what the caching allocator (PyTorch) said at the OOM.
 * Numbers are SNAP_UNKNOWN when absent or null. */
#define SNAP_TOP_TENSORS 8 /* the writer keeps 5; a reader takes a few more */
enum { SNAP_ROLE_PARAMETERS, SNAP_ROLE_BUFFERS, SNAP_ROLE_GRADIENTS, SNAP_ROLE_OPTIMIZER,
       SNAP_ROLE_OTHER, SNAP_ROLES };

struct snap_allocator {
    bool present;
    const char *name, *version;
    uint64_t requested_bytes, allocated_bytes, reserved_bytes, active_bytes;
    uint64_t reserved_unallocated_bytes, inactive_split_bytes;
    uint64_t largest_free_small, largest_free_large;
    uint64_t segments, num_alloc_retries, num_ooms, limit_bytes;
    uint64_t device_total_bytes, device_free_bytes;
    uint64_t peak_allocated_bytes; /* max_memory_allocated */
    /* roles: allocated_bytes by whose tensor each live block is
     * (SNAP_ROLE_*); has_roles false when the file has none (null). */
    bool has_roles;
    uint64_t roles[SNAP_ROLES];
    const char *optimizers; /* "AdamW", or NULL */
    int64_t step, peak_step; /* training steps; SNAP_UNKNOWN_I64 unknown */
    int64_t reported_ns; /* when the allocator reported them; SNAP_UNKNOWN_I64 */
    const char *config; /* "key:value,..." as written back, or NULL */
    bool has_top;       /* top_tensors was not null: the allocator's history is on */
    size_t ntop;
    struct snap_tensor_site {
        const char *where;    /* "file:line:function < ...", innermost first */
        uint64_t bytes, count;
    } top[SNAP_TOP_TENSORS];
    struct snap_tensors tensors; /* oom.allocator.tensors: at the failure */
    struct snap_origin origin;   /* oom.allocator.origin: the failing request's */
};
#define SNAP_ALLOCATOR_SCHEMA(X) /* devices[].allocator, oom.allocator */              \
    X(snap_allocator, name, name, STRN, 0)                                             \
    X(snap_allocator, version, version, STRN, 0)                                       \
    X(snap_allocator, requested_bytes, requested_bytes, U64N, 0)                       \
    X(snap_allocator, allocated_bytes, allocated_bytes, U64N, 0)                       \
    X(snap_allocator, reserved_bytes, reserved_bytes, U64N, 0)                         \
    X(snap_allocator, active_bytes, active_bytes, U64N, 0)                             \
    X(snap_allocator, reserved_unallocated_bytes, reserved_unallocated_bytes, U64N, 0) \
    X(snap_allocator, inactive_split_bytes, inactive_split_bytes, U64N, 0)             \
    X(snap_allocator, segments, segments, U64N, 0)                                     \
    X(snap_allocator, num_alloc_retries, num_alloc_retries, U64N, 0)                   \
    X(snap_allocator, num_ooms, num_ooms, U64N, 0)                                     \
    X(snap_allocator, limit_bytes, limit_bytes, U64N, 0)                               \
    X(snap_allocator, device_total_bytes, device_total_bytes, U64N, 0)                 \
    X(snap_allocator, device_free_bytes, device_free_bytes, U64N, 0)                   \
    X(snap_allocator, peak_allocated_bytes, peak_allocated_bytes, U64N, 0)             \
    X(snap_allocator, step, step, I64N, 0)                                             \
    X(snap_allocator, peak_step, peak_step, I64N, 0)                                   \
    X(snap_allocator, reported_ns, reported_ns, I64N, 0)                               \
    X(snap_allocator, largest_free_block_bytes, rd_largest_free, FN, 0)                \
    X(snap_allocator, config, rd_config, FN, 0)                                        \
    X(snap_allocator, top_tensors, rd_top_tensors, FN, 0)                              \
    X(snap_allocator, roles, has_roles, FLAG, 0)
#define SNAP_ALLOCATOR_OOM_SCHEMA(X) /* oom.allocator: SNAP_ALLOCATOR_SCHEMA's keys, then */ \
    X(snap_allocator, tensors, tensors, TENSORS, 0)                                          \
    X(snap_allocator, origin, origin, ORIGIN, 0)
#define SNAP_LARGEST_FREE_SCHEMA(X) /* allocator.largest_free_block_bytes */ \
    X(snap_allocator, small, largest_free_small, U64N, 0)                   \
    X(snap_allocator, large, largest_free_large, U64N, 0)
#define SNAP_ROLES_SCHEMA(X) /* allocator.roles; json 1, cache, 2 */                  \
    X(snap_allocator, parameters, roles[SNAP_ROLE_PARAMETERS], U64, 1)           \
    X(snap_allocator, buffers, roles[SNAP_ROLE_BUFFERS], U64, 1)                 \
    X(snap_allocator, gradients, roles[SNAP_ROLE_GRADIENTS], U64, 1)             \
    X(snap_allocator, optimizer_state, roles[SNAP_ROLE_OPTIMIZER], U64, 1)       \
    X(snap_allocator, other, roles[SNAP_ROLE_OTHER], U64, 1)                     \
    X(snap_allocator, optimizers, optimizers, STRN, 2)
#define SNAP_TOP_TENSOR_SCHEMA(X) /* allocator.top_tensors[]; json 1 after site */ \
    X(snap_tensor_site, stack, rd_site_stack, FN, 0)                            \
    X(snap_tensor_site, bytes, bytes, U64N, 1)                                  \
    X(snap_tensor_site, count, count, U64N, 1)

/* The program's phases (docs/snapshot-format.md "phases"). */
#define SNAP_PHASE_TOP 5 /* call sites the writer lists under a phase */
struct snap_phase_row {    /* one of a device's by_phase */
    int64_t phase;         /* id in snap_phases, 0: outside every phase */
    uint64_t bytes, count, at_peak_bytes, at_peak_count, allocs, bytes_allocated;
    struct snap_group top[SNAP_PHASE_TOP]; /* stack_id, stack, bytes */
    size_t ntop;
    size_t first_site, nsites; /* its sites, in snap_phase_rows.sites */
};
#define SNAP_PHASE_ROW_SCHEMA(X) /* devices[].by_phase[], host_pinned.by_phase[] */ \
    X(snap_phase_row, phase, phase, I64, 0)                                         \
    X(snap_phase_row, at_peak_bytes, at_peak_bytes, U64, 1)                         \
    X(snap_phase_row, at_peak_count, at_peak_count, U64, 1)                         \
    X(snap_phase_row, bytes, bytes, U64, 1)                                         \
    X(snap_phase_row, count, count, U64, 1)                                         \
    X(snap_phase_row, allocs, allocs, U64, 1)                                       \
    X(snap_phase_row, bytes_allocated, bytes_allocated, U64, 1)                     \
    X(snap_phase_row, top_at_peak, rd_top_item, LIST, 0)                            \
    X(snap_phase_row, sites, rd_sites, FN, 0)

/* by_phase[].sites: one call site's share of a phase (all of them). */
struct snap_phase_site {
    int64_t stack_id;      /* 0: no stack */
    uint32_t stack;        /* index into snapshot.stacks, or SNAP_NO_STACK */
    uint64_t at_peak_bytes, bytes, allocs, bytes_allocated;
};

struct snap_phase_rows {
    struct snap_phase_row *v;
    size_t n, cap;
    bool present;   /* the file had by_phase */
    struct snap_phase_site *sites;
    size_t nsites, sites_cap;
};

struct snap_phase {
    int64_t id, parent;
    const char *name, *source, *domain; /* domain NULL for none */
    const char *path;   /* "validation/step 1200", names joined by '/' */
};
#define SNAP_PHASE_SCHEMA(X) /* phases.list[] */ \
    X(snap_phase, id, id, I64, 0)                \
    X(snap_phase, parent, parent, I64, 0)        \
    X(snap_phase, name, name, STRN, 0)           \
    X(snap_phase, source, source, STRN, 0)       \
    X(snap_phase, domain, domain, STRN, 0)

enum snap_span_kind { SPAN_PUSH, SPAN_STARTEND, SPAN_MARK };

struct snap_span {         /* phases.ranges.data */
    int64_t start_ns, end_ns; /* end SNAP_UNKNOWN_I64: open at the dump */
    int64_t thread, phase;
    uint8_t kind;          /* enum snap_span_kind */
};

struct snap_phases {
    bool present;
    uint64_t count, pushes, overflow, unbalanced_pops, too_deep, dropped_starts;
    uint64_t recorded; /* ranges.recorded */
    struct snap_phase *v; /* as listed (by id) */
    size_t n, cap;
    struct snap_span *spans;
    size_t nspans, spans_cap;
};
#define SNAP_PHASES_SCHEMA(X) /* phases */                   \
    X(snap_phases, count, count, U64, 0)                     \
    X(snap_phases, pushes, pushes, U64, 0)                   \
    X(snap_phases, overflow, overflow, U64, 0)               \
    X(snap_phases, unbalanced_pops, unbalanced_pops, U64, 0) \
    X(snap_phases, too_deep, too_deep, U64, 0)               \
    X(snap_phases, dropped_starts, dropped_starts, U64, 0)   \
    X(snap_phases, list, rd_phase, LIST, 0)                  \
    X(snap_phases, ranges, rd_ranges, FN, 0)
#define SNAP_PHASES_RANGES_SCHEMA(X) /* phases.ranges */ \
    X(snap_phases, recorded, recorded, U64, 0)           \
    X(snap_phases, data, rd_span, LIST, 0)               \
    X(snap_phases, cap, none, SKIP, 0)                   \
    X(snap_phases, columns, none, SKIP, 0)

/* oom.layout: where this process's live device and async allocations sat at
 * the failure (docs/snapshot-format.md); offsets from `base`. */
struct snap_range {
    uint64_t offset, bytes;
    uint8_t kind;
    int64_t stack_id;
    uint32_t stack; /* index in stacks, SNAP_NO_STACK */
};
#define SNAP_RANGE_SCHEMA(X) /* oom.layout.allocations[] */ \
    X(snap_range, offset, offset, U64, 0)                   \
    X(snap_range, bytes, bytes, U64, 0)                     \
    X(snap_range, kind, kind, KIND, 0)                      \
    X(snap_range, stack, stack_id, I64N, 0)

/* oom.layout.allocator_segments: a caching allocator's segments, each cut
 * into blocks (offsets from the segment's address). */
enum snap_block_state { BLOCK_FREE, BLOCK_ALLOCATED, BLOCK_PENDING, BLOCK_UNKNOWN };

struct snap_block {
    uint64_t offset, bytes;
    uint8_t state; /* enum snap_block_state */
    uint32_t pystack; /* index in snap_layout.pystacks, SNAP_NO_STACK none */
};

/* allocator_segments.stacks: a block's Python frames (PyTorch's history),
 * innermost first. */
struct snap_pyframe {
    const char *file, *function;
    int64_t line;
};
#define SNAP_SEG_FRAME_SCHEMA(X) /* allocator_segments.stacks[][] */ \
    X(snap_pyframe, file, file, STR, 0)                             \
    X(snap_pyframe, line, line, I64, 0)                             \
    X(snap_pyframe, function, function, STR, 0)

struct snap_pystack {
    size_t first, n; /* in snap_layout.pyframes */
};

struct snap_segment {
    const char *address; /* hex */
    uint64_t bytes;
    bool small;          /* the small pool */
    size_t first, nblocks; /* in snap_layout.blocks */
};

struct snap_layout {
    bool present;
    bool has_segments;              /* allocator_segments is an object */
    uint64_t segments_count, blocks_count; /* all, listed or not */
    struct snap_segment *segments;
    size_t nsegments, segments_cap;
    struct snap_block *blocks;
    size_t nblocks, blocks_cap;
    struct snap_pystack *pystacks;
    size_t npystacks, pystacks_cap;
    struct snap_pyframe *pyframes;
    size_t npyframes, pyframes_cap;
    const char *base; /* hex address of the lowest allocation, NULL if none */
    uint64_t span_bytes, count, bytes, gap_count, gap_bytes;
    uint64_t largest_gap_bytes, gaps_at_least_request;
    struct snap_range *allocations; /* by offset: all, or the notable ones */
    size_t nallocations, allocations_cap;
    struct snap_range *gaps;        /* largest first (kind, stack unused) */
    size_t ngaps, gaps_cap;
    bool has_best_free;
    struct snap_range best_free;    /* the free that opens the largest hole */
    uint64_t best_free_hole_bytes;
};
#define SNAP_LAYOUT_SCHEMA(X) /* oom.layout */                           \
    X(snap_layout, base, base, STRN, 0)                                  \
    X(snap_layout, span_bytes, span_bytes, U64, 0)                       \
    X(snap_layout, count, count, U64, 0)                                 \
    X(snap_layout, bytes, bytes, U64, 0)                                 \
    X(snap_layout, gap_count, gap_count, U64, 0)                         \
    X(snap_layout, gap_bytes, gap_bytes, U64, 0)                         \
    X(snap_layout, largest_gap_bytes, largest_gap_bytes, U64, 0)         \
    X(snap_layout, gaps_at_least_request, gaps_at_least_request, U64, 0) \
    X(snap_layout, allocations, rd_allocation, LIST, 0)                  \
    X(snap_layout, gaps, rd_gap, LIST, 0)                                \
    X(snap_layout, best_free, rd_best_free, FN, 0)                       \
    X(snap_layout, allocator_segments, rd_allocator_segments, FN, 0)
#define SNAP_BEST_FREE_SCHEMA(X) /* oom.layout.best_free */  \
    X(snap_layout, offset, best_free.offset, U64, 0)         \
    X(snap_layout, bytes, best_free.bytes, U64, 0)           \
    X(snap_layout, stack, best_free.stack_id, I64N, 0)       \
    X(snap_layout, hole_bytes, best_free_hole_bytes, U64, 0)
#define SNAP_SEGMENTS_SCHEMA(X) /* allocator_segments: devices[]' and oom.layout's */ \
    X(snap_layout, count, segments_count, U64, 0)                                     \
    X(snap_layout, blocks, blocks_count, U64, 0)                                      \
    X(snap_layout, stacks, rd_pystack, LIST, 0)                                       \
    X(snap_layout, segments, rd_segment, LIST, 0)

struct snap_device {
    struct snap_allocator allocator; /* latest state (allocator_state), if any */
    /* allocator_segments: the allocator's segments at that state (only the
     * has_segments ... pyframes fields of the layout are used) */
    struct snap_layout segments;
    int64_t ordinal;
    int64_t peak_phase; /* the phase the peak was reached in, 0 none */
    uint64_t total_bytes, free_bytes, limit_bytes; /* may be SNAP_UNKNOWN */
    uint64_t current_bytes, peak_bytes;
    int64_t peak_time_ns;
    struct snap_kind_stats by_kind[DEVICE_KINDS];
    bool by_kind_present; /* the file had "by_kind" */
    struct snap_vmm vmm;
    struct snap_frag frag;
    struct snap_groups live, at_peak;
    struct snap_groups churn; /* whole run by site: count = allocs, bytes =
                                 bytes allocated, frees, temporary */
    struct snap_bucket *hist;
    size_t nhist, hist_cap;
    struct snap_phase_rows by_phase;
    struct snap_tensors tensors;      /* live at the dump */
    struct snap_tensors peak_tensors; /* live at max_memory_allocated */
    struct snap_growth growth;
    struct snap_series tensor_series;
};
#define SNAP_DEVICE_SCHEMA(X) /* devices[] */                                \
    X(snap_device, ordinal, ordinal, I64, 1)                                 \
    X(snap_device, total_bytes, total_bytes, U64N, 1)                        \
    X(snap_device, free_bytes, free_bytes, U64N, 1)                          \
    X(snap_device, limit_bytes, limit_bytes, U64N, 1)                        \
    X(snap_device, current_bytes, current_bytes, U64, 1)                     \
    X(snap_device, peak_bytes, peak_bytes, U64, 1)                           \
    X(snap_device, peak_time_ns, peak_time_ns, I64N, 1)                      \
    X(snap_device, peak_phase, peak_phase, I64N, 0)                          \
    X(snap_device, by_kind, rd_by_kind, FN, 0)                               \
    X(snap_device, vmm, vmm, OPTIONAL, 0)                                    \
    X(snap_device, live, live, GROUPS, 0)                                    \
    X(snap_device, at_peak, at_peak, GROUPS, 0)                              \
    X(snap_device, churn, churn, GROUPS, 0)                                  \
    X(snap_device, histogram, rd_bucket, LIST, 0)                            \
    X(snap_device, fragmentation, frag, OPTIONAL, 0)                         \
    X(snap_device, allocator, snapshot_read_device_allocator, FN, 0)         \
    X(snap_device, allocator_segments, snapshot_read_device_segments, FN, 0) \
    X(snap_device, by_phase, by_phase, PHASE_ROWS, 0)                        \
    X(snap_device, tensors, tensors, TENSORS, 0)                             \
    X(snap_device, peak_tensors, peak_tensors, PEAK_TENSORS, 0)              \
    X(snap_device, growth, growth, GROWTH, 0)                                \
    X(snap_device, tensor_series, tensor_series, SERIES, 0)                  \
    X(snap_device, mark, none, SKIP, 0)

struct snap_host {
    bool present;
    struct snap_kind_stats stats;
    struct snap_groups live, at_peak;
    struct snap_phase_rows by_phase;
};
#define SNAP_HOST_SCHEMA(X) /* host_pinned: SNAP_KIND_STATS_SCHEMA's keys, then */ \
    X(snap_host, live, live, GROUPS, 0)                                            \
    X(snap_host, at_peak, at_peak, GROUPS, 0)                                      \
    X(snap_host, by_phase, by_phase, PHASE_ROWS, 0)                                \
    X(snap_host, churn, none, SKIP, 0)

struct snap_process {
    int64_t pid, ppid, rank; /* rank SNAP_UNKNOWN_I64 when null */
    int64_t local_rank, world_size; /* SNAP_UNKNOWN_I64 when null or absent */
    const char *exe, *host, *tool_version; /* NULL when unknown */
    const char **cmdline;
    size_t ncmdline, cmdline_cap;
    int64_t start_wall_ns, dump_time_ns;
};
#define SNAP_PROCESS_SCHEMA(X) /* process; json 1, cmdline, 2 */ \
    X(snap_process, pid, pid, I64N, 1)                           \
    X(snap_process, ppid, ppid, I64N, 1)                         \
    X(snap_process, rank, rank, I64N, 1)                         \
    X(snap_process, exe, exe, STRN, 1)                           \
    X(snap_process, cmdline, rd_cmdline_item, LIST, 0)           \
    X(snap_process, host, host, STRN, 2)                         \
    X(snap_process, start_wall_ns, start_wall_ns, I64N, 2)       \
    X(snap_process, dump_time_ns, dump_time_ns, I64N, 2)         \
    X(snap_process, tool_version, tool_version, STRN, 2)         \
    X(snap_process, local_rank, local_rank, I64N, 0)             \
    X(snap_process, world_size, world_size, I64N, 0)

struct snap_limit {
    int64_t device;
    uint64_t bytes;
};
#define SNAP_LIMIT_SCHEMA(X) /* config.limit_bytes[] */ \
    X(snap_limit, device, device, I64, 1)               \
    X(snap_limit, bytes, bytes, U64, 1)

struct snap_config {
    uint64_t depth, event_cap;
    uint64_t temporary_ms; /* CUMEMTRACE_TEMPORARY, 0 none */
    int python, native; /* 1, 0, or -1 unknown */
    struct snap_limit *limits;
    size_t nlimits, limits_cap;
};
#define SNAP_CONFIG_SCHEMA(X) /* config; json 1, limits */ \
    X(snap_config, depth, depth, U64N, 1)                  \
    X(snap_config, event_cap, event_cap, U64N, 1)          \
    X(snap_config, python, python, BOOLN, 1)               \
    X(snap_config, native, native, BOOLN, 1)               \
    X(snap_config, temporary_ms, temporary_ms, U64, 1)     \
    X(snap_config, limit_bytes, rd_limit, LIST, 0)

struct snap_counters {
    bool present; /* the file had "counters" */
    uint64_t unknown_frees, failed_frees, stacks, live_allocations;
    uint64_t wrong_kind_frees, reentrant_untracked;
};
#define SNAP_COUNTERS_SCHEMA(X) /* counters */                         \
    X(snap_counters, unknown_frees, unknown_frees, U64, 1)             \
    X(snap_counters, wrong_kind_frees, wrong_kind_frees, U64, 1)       \
    X(snap_counters, reentrant_untracked, reentrant_untracked, U64, 1) \
    X(snap_counters, failed_frees, failed_frees, U64, 1)               \
    X(snap_counters, stacks, stacks, U64, 1)                           \
    X(snap_counters, live_allocations, live_allocations, U64, 1)

struct snap_oom {
    bool present;
    uint64_t requested_bytes;
    int64_t device; /* -1 host-pinned */
    uint8_t kind;
    const char *entry_point;
    int64_t thread, time_ns;
    int64_t stack_id;
    uint32_t stack;
    int64_t phase; /* the failing thread's phase, 0 none */
    uint64_t total_bytes, free_bytes, limit_bytes; /* may be SNAP_UNKNOWN */
    uint64_t tracked_bytes, untracked_bytes;
    uint64_t by_kind[DEVICE_KINDS];
    uint8_t cause; /* enum oom_cause */
    const char *cause_name; /* as written, for an unknown cause */
    uint64_t shortfall_bytes, attempts;
    int recovered; /* 1, 0, -1 unknown */
    uint64_t released_bytes, released_count;
    struct snap_groups released; /* what the retries freed, by call site */
    struct snap_groups live;
    struct snap_allocator allocator; /* the caching allocator's own view */
    struct snap_layout layout;
};
#define SNAP_OOM_SCHEMA(X) /* oom; json 1, kind, 2, by_kind cause during, 3 */ \
    X(snap_oom, requested_bytes, requested_bytes, U64, 1)                      \
    X(snap_oom, device, device, I64, 1)                                        \
    X(snap_oom, kind, kind, KIND, 0)                                           \
    X(snap_oom, entry_point, entry_point, STRN, 2)                             \
    X(snap_oom, thread, thread, I64N, 2)                                       \
    X(snap_oom, time_ns, time_ns, I64N, 2)                                     \
    X(snap_oom, stack, stack_id, I64N, 0)                                      \
    X(snap_oom, phase, phase, I64, 0)                                          \
    X(snap_oom, total_bytes, total_bytes, U64N, 2)                             \
    X(snap_oom, free_bytes, free_bytes, U64N, 2)                               \
    X(snap_oom, limit_bytes, limit_bytes, U64N, 2)                             \
    X(snap_oom, tracked_bytes, tracked_bytes, U64N, 2)                         \
    X(snap_oom, untracked_bytes, untracked_bytes, U64N, 2)                     \
    X(snap_oom, by_kind, rd_oom_by_kind, FN, 0)                                \
    X(snap_oom, cause, rd_oom_cause, FN, 0)                                    \
    X(snap_oom, shortfall_bytes, shortfall_bytes, U64N, 3)                     \
    X(snap_oom, attempts, attempts, U64N, 3)                                   \
    X(snap_oom, recovered, recovered, BOOLN, 3)                                \
    X(snap_oom, released_bytes, released_bytes, U64N, 3)                       \
    X(snap_oom, released_count, released_count, U64N, 3)                       \
    X(snap_oom, live, live, GROUPS, 0)                                         \
    X(snap_oom, released, released, GROUPS, 0)                                 \
    X(snap_oom, allocator, snapshot_read_allocator, FN, 0)                     \
    X(snap_oom, layout, snapshot_read_layout, FN, 0)

/* A failed allocation attempt, or the success that ended a retry chain. */
struct snap_attempt {
    int64_t t_ns, device;
    uint64_t requested_bytes, chain, attempt;
    const char *outcome; /* "failed" or "recovered" */
};
#define SNAP_ATTEMPT_SCHEMA(X) /* ooms.attempts[] */          \
    X(snap_attempt, t_ns, t_ns, I64, 0)                       \
    X(snap_attempt, device, device, I64, 0)                   \
    X(snap_attempt, requested_bytes, requested_bytes, U64, 0) \
    X(snap_attempt, chain, chain, U64, 0)                     \
    X(snap_attempt, attempt, attempt, U64, 0)                 \
    X(snap_attempt, outcome, outcome, STR, 0)

struct snap_ooms {
    uint64_t count, failed_attempts, recovered, retry_released_bytes;
    uint64_t suppressed; /* post-mortems not written (CUMEMTRACE_MAX_OOM_DUMPS) */
    const char **dumps;
    size_t ndumps, dumps_cap;
    struct snap_attempt *attempts; /* time order */
    size_t nattempts, attempts_cap;
};
#define SNAP_OOMS_SCHEMA(X) /* ooms */                               \
    X(snap_ooms, count, count, U64, 1)                               \
    X(snap_ooms, failed_attempts, failed_attempts, U64, 1)           \
    X(snap_ooms, recovered, recovered, U64, 1)                       \
    X(snap_ooms, retry_released_bytes, retry_released_bytes, U64, 1) \
    X(snap_ooms, suppressed, suppressed, U64, 1)                     \
    X(snap_ooms, dumps, rd_dump_name, LIST, 0)                       \
    X(snap_ooms, attempts, rd_attempt, LIST, 0)

struct snap_event {
    int64_t t_ns;
    int64_t delta;   /* signed bytes */
    uint64_t current; /* the device's current_bytes after the event */
    int64_t stack_id; /* 0 when null */
    int32_t device;  /* -1 host-pinned */
    uint8_t kind;
    bool unfocused;  /* --focus: its stack is out of focus (frame_filter.h) */
};

struct snap_events {
    uint64_t cap, recorded, stride;
    int thinned; /* 1, 0, -1 unknown */
    struct snap_event *v;
    size_t n, alloc;
    size_t rows; /* rows in the file: n unless the view asked for none
                    (snapctx.no_event_rows), then n is 0 */
};
#define SNAP_EVENTS_SCHEMA(X) /* events; json 1, kept, 2 */ \
    X(snap_events, cap, cap, U64N, 1)                       \
    X(snap_events, recorded, recorded, U64N, 1)             \
    X(snap_events, stride, stride, U64N, 2)                 \
    X(snap_events, thinned, thinned, BOOLN, 2)              \
    X(snap_events, columns, rd_columns, FN, 0)              \
    X(snap_events, data, rd_data, FN, 0)                    \
    X(snap_events, bucket_ns, none, SKIP, 0)

struct snapctx;
struct symbolizer;

/* allocator_refresh: the dump asked the allocator's layer for fresh
 * figures (docs/snapshot-format.md). */
struct snap_refresh {
    bool present;
    int answered, direct; /* -1 unknown */
    int64_t asked_ns, waited_ns, wait_ms; /* SNAP_UNKNOWN_I64 unknown */
};
#define SNAP_REFRESH_SCHEMA(X) /* allocator_refresh */ \
    X(snap_refresh, answered, answered, BOOLN, 0)      \
    X(snap_refresh, direct, direct, BOOLN, 0)          \
    X(snap_refresh, asked_ns, asked_ns, I64N, 0)       \
    X(snap_refresh, waited_ns, waited_ns, I64N, 0)     \
    X(snap_refresh, wait_ms, wait_ms, I64N, 0)

struct snapshot {
    struct snapctx *ctx;
    const char *file;       /* the path given on the command line */
    uint64_t file_bytes;
    int64_t version;
    const char *reason;     /* "exit", "oom", "signal", "api" (as written) */
    const char *recovered;  /* read from a killed process's stream: how stale
                               its last checkpoint is (a sentence), else NULL */
    const char *signal;     /* reason "signal": "SIGTERM"...; NULL otherwise */
    int64_t sequence;
    struct snap_process process;
    struct snap_refresh refresh;
    struct snap_config config;
    struct snap_device *devices; /* ascending ordinal */
    size_t ndevices, devices_cap;
    struct snap_host host;
    struct snap_counters counters;
    struct snap_oom oom;
    struct snap_ooms ooms;
    struct snap_events events;
    struct snap_phases phases;
    struct snap_stack *stacks; /* sorted by id */
    size_t nstacks, stacks_cap;
};
#define SNAP_TOP_SCHEMA(X) /* the document; json 1 after format_version */ \
    X(snapshot, format, rd_format, FN, 0)                                  \
    X(snapshot, version, rd_version, FN, 0)                                \
    X(snapshot, reason, reason, STRN, 1)                                   \
    X(snapshot, signal, signal, STRN, 0)                                   \
    X(snapshot, sequence, sequence, I64N, 1)                               \
    X(snapshot, process, process, OBJECT, 0)                               \
    X(snapshot, allocator_refresh, refresh, OPTIONAL, 0)                   \
    X(snapshot, config, config, OBJECT, 0)                                 \
    X(snapshot, devices, rd_device, LIST, 0)                               \
    X(snapshot, host_pinned, host, OPTIONAL, 0)                            \
    X(snapshot, counters, rd_counters, FN, 0)                              \
    X(snapshot, oom, rd_oom, FN, 0)                                        \
    X(snapshot, ooms, rd_ooms, FN, 0)                                      \
    X(snapshot, phases, snapshot_read_phases, FN, 0)                       \
    X(snapshot, events, snapshot_bulk_events, FN, 0)                       \
    X(snapshot, modules, snapshot_bulk_module, LIST, 0)                    \
    X(snapshot, stacks, snapshot_bulk_stack, LIST, 0)

/* Shared by every snapshot loaded in one run of the tool. */
struct snapctx {
    struct arena arena;  /* strings, frames' names, stack frame arrays */
    struct hmap strings; /* interned strings */
    struct hmap names;   /* frame name -> index in frames */
    struct hmap demangled; /* mangled symbol -> index in demangled_names */
    struct frame *frames;
    size_t nframes, frames_cap;
    struct hmap site_keys[BY_COUNT];
    struct site *sites[BY_COUNT];
    size_t nsites[BY_COUNT], sites_cap[BY_COUNT];
    const char **demangled_names; /* by value of the demangled map */
    size_t ndemangled, demangled_cap;
    struct symbolizer *sym; /* debug information, NULL when off */
    /* Set by a view that reads no event rows (report, diff): each row is
     * still read and checked, and counted in events.rows, but not kept - a
     * million rows are 40 MiB a file. */
    bool no_event_rows;
};

/* Prepares an empty context. */
void snapshot_ctx_init(struct snapctx *ctx);

/* Releases everything in the context (snapshots must be freed first). */
void snapshot_ctx_free(struct snapctx *ctx);

/* Releases what a snapshot owns outside the context; safe on a zeroed or
 * partially read snapshot. */
void snapshot_free(struct snapshot *s);

/* Interns n bytes of s; NULL when out of memory. */
const char *snapshot_intern(struct snapctx *ctx, const char *s, size_t n);

/* s as a text view may print it (esc.h: control characters, bidi
 * overrides and bytes that are not UTF-8 as \xNN): s itself when it needs
 * nothing, else an interned copy; NULL for NULL, "?" when out of memory. */
const char *snapshot_display(struct snapctx *ctx, const char *s);

/* Index of the stack with this id in s->stacks, or SNAP_NO_STACK. */
uint32_t snapshot_stack_index(const struct snapshot *s, int64_t id);

/* The kind's name as the format writes it ("host_pinned"), or "other". */
const char *snapshot_kind_name(int kind);
/* What prose calls a kind ("device memory"; "memory" for one this version
 * does not know), format.h's phrase. */
const char *snapshot_kind_phrase(int kind);
/* Every kind's name by KIND_* (format.h's, then "other"). */
extern const char *const snapshot_kind_names[KIND_COUNT];

/* KIND_* for a name ("host-pinned" is accepted too), KIND_OTHER if unknown. */
int snapshot_kind_parse(const char *name);
/* As snapshot_kind_parse, for the n bytes at s (no NUL among them). */
int snapshot_kind_span(const char *s, size_t n);

/* "exhausted", "refused_while_free", "limit", ..., or the name as written. */
const char *snapshot_cause_name(const struct snap_oom *oom);

/* The device with that ordinal, or NULL. */
const struct snap_device *snapshot_device(const struct snapshot *s, int64_t ordinal);

/* True when the snapshot is an OOM post-mortem (reason "oom" and an oom
 * object). */
bool snapshot_is_oom(const struct snapshot *s);

/* The highest device peak of the snapshot (0 without devices). */
uint64_t snapshot_max_peak(const struct snapshot *s);

/* Grows a vector of elem-sized items so that it holds at least need;
 * returns 0 or -1 on OOM (the vector is unchanged then). */
int snapshot_vec_reserve(void **v, size_t *cap, size_t elem, size_t need);

/* Refuses s (CLI_EINVARIANT): rule is the invariant's name in
 * docs/snapshot-format.md, fmt the figures that break it.  Returns the
 * error code, for `return snapshot_broken(...)`. */
struct cli_error;
int snapshot_broken(const struct snapshot *s, struct cli_error *err, const char *rule,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
