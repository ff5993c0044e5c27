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
struct html_tview {
    bool on;
    uint32_t base;
    struct html_tstack *stacks;
    size_t nstacks, cap;
    struct html_tmode (*dev)[HTML_FLAME_OOM + 1];
    size_t ndev;
    struct arena arena;
    struct hmap by_group; /* group pointer -> stack id */
};

/* Builds v for s; 0, or -1 when out of memory (html_tview_free after both). */
int html_tview_build(struct html_tview *v, struct snapshot *s);
void html_tview_free(struct html_tview *v);
/* The stack id of group g (made at its first call), UINT32_MAX when out of
 * memory. */
uint32_t html_tview_stack(struct html_tview *v, struct snapshot *s, const struct snap_tgroup *g);
const uint32_t *html_tstack_frames(const struct html_tstack *t);
/* A new stack of one marker frame named `name` ("[PyTorch's cache]");
 * UINT32_MAX when out of memory. */
uint32_t html_tview_marker(struct html_tview *v, struct snapshot *s, const char *name);

/* Counts the nodes of s's flame graph in a mode into *nodes, as the page
 * lays them out (html_flame.c); tv: the file's tensor model.  -1 when out
 * of memory. */
int html_flame_nodes(const struct snapshot *s, const struct html_tview *tv, int mode,
                     uint64_t *nodes);

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
