/* holders.h - who holds a device's memory at one moment, the model every
 * view prints: in a PyTorch process PyTorch's live blocks grouped by the
 * user's line (the snapshot's `tensors`, `peak_tensors`,
 * `oom.allocator.tensors`), with PyTorch's cache as one row of its own;
 * otherwise - a program without PyTorch, a file without the tensor
 * members, or the view's --segments flag - the driver's allocations by the
 * stack that made them (`live`, `at_peak`, `oom.live`: for a caching
 * allocator, which line first created each cached segment).
 *
 * A tensor holder's identity across files is its label frame's name
 * ("file:line:function", ctx->frames[label].name): frames of one snapctx
 * are interned, so two files' holders of one line have the same label
 * index (diff pairs them by it).  --focus has dropped the groups out of
 * focus when the file was read; --hide moves a group whose line it hides
 * to the next line outward, and groups sharing a label are one holder.
 * Groups with no user line stay apart: the blocks made on autograd's
 * backward thread are named by their node and forward line
 * ("[backward of model.py:142:forward, MmBackward0]"), the rest "[no user
 * frame]".
 */
#ifndef CUMEMTRACE_CLI_HOLDERS_H
#define CUMEMTRACE_CLI_HOLDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

enum holders_moment {
    HOLDERS_OOM,  /* at the failure of a post-mortem (oom.device) */
    HOLDERS_PEAK, /* at the device's peak: PyTorch's max_memory_allocated
                     for tensors, the device's peak_bytes for segments */
    HOLDERS_NOW,  /* live at the dump (at exit: the possible leaks) */
};

enum holders_source {
    HOLDERS_NONE,     /* nothing to list (no such device, no groups) */
    HOLDERS_TENSORS,  /* PyTorch's live blocks by user line */
    HOLDERS_SEGMENTS, /* the driver's allocations by stack */
};

struct holder {
    uint32_t label;  /* tensors: frame index of the line (SNAP_NO_FRAME: the
                        blocks whose stack has no user frame); segments:
                        SNAP_NO_FRAME */
    uint32_t stack;  /* segments: index in snapshot.stacks (SNAP_NO_STACK
                        none); tensors: SNAP_NO_STACK */
    const char *name;    /* identity: the label frame's name, or for segments
                            the site's label (frames_group_label BY_STACK) */
    const char *display; /* as text views print it */
    const uint32_t *frames; /* the stack shown, innermost first */
    uint32_t nframes;
    uint64_t bytes, count;
    /* tensors: the largest group of the holder, for its origin and stack */
    const struct snap_tgroup *group;
    uint8_t kind; /* segments: enum snap_kind */
};

struct holders {
    enum holders_source source;
    struct holder *v; /* largest bytes first, ties by name */
    size_t n;
    uint64_t bytes, count; /* what v holds */
    /* tensors: PyTorch's allocated_bytes and blocks at that reading (v plus
     * `more`, plus what --focus dropped); segments: the device's bytes */
    uint64_t total_bytes, total_count;
    bool has_more; /* the writer folded a tail of groups past thousands */
    uint64_t more_groups, more_bytes, more_count;
    bool has_cache; /* tensors: PyTorch's cache row */
    uint64_t cache_bytes, cache_segments, cache_largest_free; /* SNAP_UNKNOWN unknown */
    int64_t time_ns, step; /* HOLDERS_PEAK with tensors: when; SNAP_UNKNOWN_I64 */
};

/* --segments (every view that reads snapshots, cli_frame_args): the
 * driver's view wherever the tensors would answer.  Set before any view
 * asks; holders_get then answers with segments whatever its argument. */
void holders_set_segments(bool segments);
bool holders_segments(void);

/* Whether the moment has PyTorch's tensors for device d of s (d NULL with
 * HOLDERS_OOM: the failure's); false for a file without them. */
bool holders_have_tensors(const struct snapshot *s, const struct snap_device *d,
                          enum holders_moment m);

/* The tensors of device d of s at moment m as the file gave them (d NULL
 * with HOLDERS_OOM: the failure's), one entry per group with its whole
 * stack - for the views that draw stacks (flamegraph, export) rather than
 * lines; NULL, or present false, when the file has none or --segments was
 * given (holders_set_segments). */
const struct snap_tensors *holders_tensors(const struct snapshot *s,
                                           const struct snap_device *d, enum holders_moment m);

/* A group's name as its holder has it: its line's frame name (display:
 * as text views print it), "[backward of model.py:142:forward,
 * MmBackward0]" for autograd's blocks, "[no user frame]"; NULL when out
 * of memory. */
const char *holders_group_name(struct snapshot *s, const struct snap_tgroup *g, bool display);

/* Fills *out (the caller's, zeroed by this function) with the holders of
 * device d of s at moment m: the tensors when the file has them and
 * segments is false, else the driver's groups.  d may be NULL for
 * HOLDERS_OOM (the failure's device; host-pinned has no tensors).  Returns
 * 0, or -1 when out of memory (nothing to free then); holders_free after. */
int holders_get(struct snapshot *s, const struct snap_device *d, enum holders_moment m,
                bool segments, struct holders *out);

/* The rows of a device's `growth` as holders (bytes: live now, the row's
 * bytes_per_step, steps and first/last_step through group); source NONE
 * when the file has no growth.  0, or -1 when out of memory. */
int holders_growth(struct snapshot *s, const struct snap_device *d, struct holders *out);

/* The name of line j of a device's tensor_series as its holder has it
 * (display: as text views print it): the site's frame, or "[no user
 * frame]" for the blocks with none. */
const char *holders_series_name(const struct snapshot *s, const struct snap_series *sr,
                                size_t j, bool display);

/* The frames of h's stack after its line, outward, as "< caller < ...", at
 * most max (whole: the frames before the line too, "from <inner < ...> in
 * the line;"); a tensors holder with no line: its stack's first max frames,
 * "in <frame < ...>"; "" when there are none.  Returns buf. */
const char *holders_callers(const struct snapshot *s, const struct holder *h, unsigned max,
                            bool whole, char *buf, size_t n);

void holders_free(struct holders *h);


#endif
