/* html.h - `cumemtrace html` and `diff --html`: one self-contained page.
 *
 * The page is src/cli/views/html/report.css and the script joined from the .js
 * files there (inlined at build time, see html_page.c and HTML_JS in the
 * Makefile) plus a JSON model of the snapshots (html_model.c) in a
 * <script type="application/json" id="cmt-data"> element; the script draws
 * everything from that model, by hand in SVG (docs/cli.md says why).
 */
#ifndef CUMEMTRACE_CLI_HTML_H
#define CUMEMTRACE_CLI_HTML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "hmap.h"
#include "json_out.h"
#include "snapshot.h"

/* Timeline bands per device: the top call sites at that device's peak;
 * the rest is drawn as one "other" band. */
#define HTML_BANDS 8
/* Above this many events of a device the timeline keeps, per time slice,
 * the events where the total is lowest and highest (extrema survive). */
#define HTML_SLICES 2000

/* a + b, UINT64_MAX where it would wrap (a site's bytes summed over devices) */
static inline uint64_t html_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* A stack index as the model writes it: -1 for none. */
static inline void html_stack_ref(struct json_out *w, uint32_t stack)
{
    if (stack == SNAP_NO_STACK)
        json_out_i64(w, -1);
    else
        json_out_u64(w, stack);
}

/* The flame graph's modes: held at the peak, live at the dump, at the OOM. */
enum { HTML_FLAME_PEAK, HTML_FLAME_LIVE, HTML_FLAME_OOM };

/* The page's tensor model of a file (html_tensors.c): in a PyTorch process
 * the flame graph, the site table and the timeline draw PyTorch's live
 * blocks by the user's line (holders.h, as `flamegraph` and `report` do),
 * not the driver's segments.  Each group's stack, and the folded tail and
 * PyTorch's cache as a marker frame each, becomes a stack of the page past
 * the file's own (ids base, base + 1, ...: no CUDA entry point, so the page
 * draws no entry leaf under them).  dev[d][mode] are device index d's rows
 * at a moment (HTML_FLAME_*), has false where the file has no tensors then
 * (the page draws the driver's groups there); on false for a file without
 * any, or under --segments. */
struct html_tstack {
    const uint32_t *frames; /* innermost first; NULL: the one frame `one` */
    uint32_t nframes, one;
};
struct html_trow {
    uint32_t stack;
    uint64_t bytes, count;
};
struct html_tmode {
    bool has;
    struct html_trow *v;
    size_t n, cap;
};
/* A row of the site table: one holder (the user's line, as report lists
 * them), the writer's folded tail or PyTorch's cache, over every device. */
struct html_tline {
    const char *label; /* the holder's name as report prints it */
    uint32_t stack;    /* a stack of the page */
    uint64_t bytes[HTML_FLAME_OOM + 1]; /* at the peak, the dump, the failure */
};
struct html_tview {
    bool on;
    uint32_t base;
    struct html_tstack *stacks;
    size_t nstacks, cap;
    struct html_tmode (*dev)[HTML_FLAME_OOM + 1];
    size_t ndev;
    struct html_tline *lines;
    size_t nlines, lines_cap;
    bool known[HTML_FLAME_OOM + 1]; /* a device had tensors at that moment */
    struct arena arena;
    struct hmap by_group; /* group pointer -> stack id */
    struct hmap by_label; /* line label -> index in lines */
};

/* Builds v for s; 0, or -1 when out of memory (html_tview_free after both). */
int html_tview_build(struct html_tview *v, struct snapshot *s);
void html_tview_free(struct html_tview *v);
const uint32_t *html_tstack_frames(const struct html_tstack *t);

/* A reading of PyTorch's tensors on a device's timeline: at t_ns each
 * band's bytes. */
struct html_reading {
    int64_t t_ns;
    int64_t *v;
};
/* The timeline of device index d: its bands, the largest lines (indices in
 * v->lines, at most HTML_BANDS) at the peak, else at the failure, else at
 * the dump; and the bytes of those lines at each reading with a time (the
 * peak, the failure, the dump, the layer's between dumps: tensor_series),
 * in time order, *rd NULL when none.  0, or -1 when out of memory. */
int html_tview_bands(const struct html_tview *v, struct snapshot *s, size_t d, uint32_t *bands,
                     size_t *nb, struct html_reading **rd, size_t *nrd);
void html_readings_free(struct html_reading *rd, size_t n);

/* Counts the nodes of s's flame graph in a mode into *nodes, as the page
 * lays them out (html_flame.c); tv: the file's tensor model, entry_of: each
 * stack's entry point as the model numbers them.  -1 when out of memory. */
int html_flame_nodes(const struct snapshot *s, const struct html_tview *tv,
                     const uint32_t *entry_of, int mode, uint64_t *nodes);

/* Writes the model of s[0..n) ("kind": "report" or "diff", a diff being
 * n == 2 with s[0] the base) as one JSON value.  -1 when out of memory. */
int html_model_write(struct json_out *w, struct snapshot **s, size_t n, const char *kind);

/* Writes the model's "layout" of an OOM post-mortem (html_layout.c): the
 * address layout of the failing device's live allocations as
 * {base, span, count, bytes, gap_count, gap_bytes, largest_gap, fit,
 * allocs: [[offset, bytes, stack]], gaps: [[offset, bytes]],
 * segments: the caching allocator's, or null, best: [offset, bytes, hole]
 * or null}, or null without one. */
void html_layout_write(struct json_out *w, const struct snap_oom *o);

/* The file's phases for the timeline (html_phases.c): "ranges": null, or
 * {paths: [path by phase id, "" for 0], spans: [[start, end|null, thread,
 * phase, kind]]}, kind 0 push, 1 start/end, 2 mark. */
void html_phases_write(struct json_out *w, const struct snapshot *s);

/* Writes "tensors": null without a caching allocator's figures (a == NULL
 * or absent), else {peak_allocated (`peak`: max_memory_allocated, or
 * unknown), allocated, reserved, top: null (history off) or [[where,
 * bytes, count]]} (html_tensors.c). */
void html_tensors_write(struct json_out *w, const struct snap_allocator *a, uint64_t peak);

/* Writes "holders": for device d {peak, now, growth}, for d NULL (a
 * post-mortem's failure) {oom}: each moment null without PyTorch's tensors,
 * else {total, count, step, time_ns, cache, more, rows: [[line, bytes,
 * count, callers]]} (holders.h; --segments gives null), growth [[line,
 * bytes now, bytes a step, first step, last step]].  0, or -1 when out of
 * memory (html_tensors.c). */
int html_holders_write(struct json_out *w, struct snapshot *s, const struct snap_device *d);

/* "roles": [{title, text, optimizers, parts: [[role, bytes]...]}], one per
 * allocator state whose roles PyTorch's layer measured (html_roles.c). */
void html_roles_write(struct json_out *w, const struct snapshot *s);

/* Writes the whole page to path (or stdout for "-"); title goes into
 * <title>.  Returns 0, or -1 with a one-line message printed. */
int html_page_write(const char *path, const char *title, struct snapshot **s, size_t n,
                    const char *kind);

/* The page title: "cumemtrace: EXE (pid N)" or "... - N processes". */
void html_title(char *buf, size_t len, struct snapshot **s, size_t n, const char *kind);

#endif
