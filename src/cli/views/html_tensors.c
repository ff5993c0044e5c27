/* html_tensors.c - PyTorch's own figures in the HTML page's model: its
 * tensors' peak (max_memory_allocated) beside each device's peak, which
 * counts what it reserved; who holds its memory - the tensor model's
 * holders by the user's line (holders.h: every line, the cache row, the
 * growth) or, without them (--segments), its history's top_tensors - drawn
 * by html/tensors.js; and the tensor model as the flame graph, the site
 * table and the timeline's bands draw it (html_tview, html.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "holders.h"
#include "html.h"

void html_tensors_write(struct json_out *w, const struct snap_allocator *a, uint64_t peak)
{
    json_out_key(w, "tensors");
    if (a == NULL || !a->present) {
        json_out_null(w);
        return;
    }
    json_out_begin_object(w);
    json_out_key_u64(w, "peak_allocated", peak);
    json_out_key_u64(w, "allocated", a->allocated_bytes);
    json_out_key_u64(w, "reserved", a->reserved_bytes);
    /* [[where ("file:line:function < ..."; "" without a Python stack),
     * bytes, count]], largest first; null when the history was off */
    json_out_key(w, "top");
    if (!a->has_top) {
        json_out_null(w);
    } else {
        json_out_begin_array(w);
        for (size_t i = 0; i < a->ntop; i++) {
            json_out_begin_array(w);
            json_out_string(w, a->top[i].where ? a->top[i].where : "");
            json_out_u64(w, a->top[i].bytes);
            json_out_u64(w, a->top[i].count);
            json_out_end_array(w);
        }
        json_out_end_array(w);
    }
    json_out_end_object(w);
}

/* One moment's holders: {total, count, step, time_ns, cache: [bytes,
 * segments, largest free] | null, more: [lines, bytes, count] | null,
 * rows: [[line, bytes, count, callers]]}, callers the shown stack outward
 * of the line, " < "-joined; null when the file has no tensors then. */
static int holders_object(struct json_out *w, struct snapshot *s, const struct snap_device *d,
                          enum holders_moment m)
{
    if (!holders_have_tensors(s, d, m)) {
        json_out_null(w);
        return 0;
    }
    struct holders h;
    if (holders_get(s, d, m, false, &h) != 0)
        return -1;
    json_out_begin_object(w);
    json_out_key_u64(w, "total", h.total_bytes);
    json_out_key_u64(w, "count", h.total_count);
    json_out_key_i64(w, "step", h.step);
    json_out_key_i64(w, "time_ns", h.time_ns);
    json_out_key_u64s(w, "cache", h.has_cache && h.cache_bytes != SNAP_UNKNOWN, NULL,
                      (uint64_t[3]){h.cache_bytes, h.cache_segments, h.cache_largest_free}, 3);
    json_out_key_u64s(w, "more", h.has_more, NULL,
                      (uint64_t[3]){h.more_groups, h.more_bytes, h.more_count}, 3);
    json_out_key(w, "rows");
    json_out_begin_array(w);
    char callers[4096];
    for (size_t i = 0; i < h.n; i++) {
        const struct holder *x = &h.v[i];
        /* "< a < b" after the line; nothing without a line */
        const char *c = x->label == SNAP_NO_FRAME ? ""
                        : holders_callers(s, x, UINT32_MAX, false, callers, sizeof callers);
        json_out_begin_array(w);
        json_out_string(w, x->display);
        json_out_u64(w, x->bytes);
        json_out_u64(w, x->count);
        json_out_string(w, c[0] == '<' ? c + 2 : c);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
    holders_free(&h);
    return 0;
}

int html_holders_write(struct json_out *w, struct snapshot *s, const struct snap_device *d)
{
    json_out_key(w, "holders");
    json_out_begin_object(w);
    int rc = 0;
    if (d == NULL) {
        json_out_key(w, "oom");
        rc = holders_object(w, s, NULL, HOLDERS_OOM);
    } else {
        json_out_key(w, "peak");
        rc = holders_object(w, s, d, HOLDERS_PEAK);
        json_out_key(w, "now");
        if (rc == 0)
            rc = holders_object(w, s, d, HOLDERS_NOW);
        /* growth: [[line, bytes now, a step, first step, last step]] */
        struct holders g;
        if (rc == 0 && (rc = holders_growth(s, d, &g)) == 0) {
            json_out_key(w, "growth");
            json_out_begin_array(w);
            for (size_t i = 0; i < g.n; i++) {
                const struct snap_tgroup *t = g.v[i].group;
                json_out_begin_array(w);
                json_out_string(w, g.v[i].display);
                json_out_u64(w, g.v[i].bytes);
                json_out_u64(w, t->bytes_per_step);
                json_out_i64(w, t->first_step);
                json_out_i64(w, t->last_step);
                json_out_end_array(w);
            }
            json_out_end_array(w);
            holders_free(&g);
        }
    }
    json_out_end_object(w);
    return rc;
}

/* ---- the tensors as the flame graph, site table and timeline draw them ---- */

/* A marker frame named as the holder's bracketed name ("[no user frame]",
 * "[PyTorch's cache]"): frames_marker adds the brackets itself. */
static uint32_t marker(struct snapshot *s, const char *name)
{
    size_t n = strlen(name);
    char buf[512];
    if (n >= 2 && name[0] == '[' && name[n - 1] == ']') {
        snprintf(buf, sizeof buf, "%.*s", (int)(n - 2), name + 1);
        name = buf;
    }
    return frames_marker(s->ctx, name);
}

/* A new synthetic stack of one frame, or of a group's frames; its id. */
static uint32_t add_stack(struct html_tview *v, const uint32_t *frames, uint32_t n,
                          uint32_t one)
{
    if (snapshot_vec_reserve((void **)&v->stacks, &v->cap, sizeof *v->stacks, v->nstacks + 1))
        return UINT32_MAX;
    v->stacks[v->nstacks] = (struct html_tstack){frames, n, one};
    return v->base + (uint32_t)v->nstacks++;
}

/* The stack id of group g (made at its first call), UINT32_MAX when out of
 * memory. */
static uint32_t group_stack(struct html_tview *v, struct snapshot *s, const struct snap_tgroup *g)
{
    uint32_t id;
    uint32_t next = v->base + (uint32_t)v->nstacks;
    if (hmap_get_or_add(&v->by_group, &g, sizeof g, next, &id, NULL))
        return UINT32_MAX;
    if (id != next)
        return id;
    if (g->nframes > 0)
        return add_stack(v, g->frames, g->nframes, 0);
    const char *name = holders_group_name(s, g, true);
    uint32_t f = name ? marker(s, name) : FRAMES_NONE;
    return f == FRAMES_NONE ? UINT32_MAX : add_stack(v, NULL, 1, f);
}

const uint32_t *html_tstack_frames(const struct html_tstack *t)
{
    return t->frames ? t->frames : &t->one;
}

static int add_row(struct html_tmode *m, uint32_t stack, uint64_t bytes, uint64_t count)
{
    if (stack == UINT32_MAX ||
        snapshot_vec_reserve((void **)&m->v, &m->cap, sizeof *m->v, m->n + 1))
        return -1;
    m->v[m->n++] = (struct html_trow){stack, bytes, count};
    return 0;
}

/* The rows of one moment: each group by its whole stack, the folded tail
 * and PyTorch's cache as a frame of their own (as `flamegraph` folds them). */
static int mode_rows(struct html_tview *v, struct snapshot *s, const struct snap_tensors *t,
                     struct html_tmode *m)
{
    m->has = true;
    for (size_t i = 0; i < t->n; i++)
        if (!t->v[i].unfocused &&
            add_row(m, group_stack(v, s, &t->v[i]), t->v[i].bytes, t->v[i].count) != 0)
            return -1;
    char text[64];
    if (t->has_more) {
        snprintf(text, sizeof text, "%" PRIu64 " more lines", t->more_groups);
        uint32_t f = frames_marker(s->ctx, text);
        if (f == FRAMES_NONE || add_row(m, add_stack(v, NULL, 1, f), t->more_bytes,
                                        t->more_count) != 0)
            return -1;
    }
    if (t->has_cache && t->cache_bytes != SNAP_UNKNOWN) {
        uint32_t f = frames_marker(s->ctx, "PyTorch's cache");
        if (f == FRAMES_NONE ||
            add_row(m, add_stack(v, NULL, 1, f), t->cache_bytes, t->cache_segments) != 0)
            return -1;
    }
    return 0;
}

static int tensor_lines(struct html_tview *v, struct snapshot *s);

int html_tview_build(struct html_tview *v, struct snapshot *s)
{
    memset(v, 0, sizeof *v);
    v->base = (uint32_t)s->nstacks;
    arena_init(&v->arena);
    hmap_init(&v->by_group, &v->arena);
    hmap_init(&v->by_label, &v->arena);
    v->dev = calloc(s->ndevices ? s->ndevices : 1, sizeof *v->dev);
    if (v->dev == NULL)
        return -1;
    v->ndev = s->ndevices;
    for (size_t d = 0; d < s->ndevices; d++) {
        const struct snap_device *dv = &s->devices[d];
        const struct snap_tensors *t[HTML_FLAME_OOM + 1] = {
            holders_tensors(s, dv, HOLDERS_PEAK), holders_tensors(s, dv, HOLDERS_NOW),
            s->oom.present && s->oom.device == dv->ordinal
                ? holders_tensors(s, NULL, HOLDERS_OOM) : NULL};
        for (int md = HTML_FLAME_PEAK; md <= HTML_FLAME_OOM; md++) {
            if (t[md] == NULL || !t[md]->present)
                continue;
            v->on = true;
            if (mode_rows(v, s, t[md], &v->dev[d][md]) != 0)
                return -1;
        }
    }
    return v->on ? tensor_lines(v, s) : 0;
}

void html_tview_free(struct html_tview *v)
{
    if (v->dev != NULL)
        for (size_t d = 0; d < v->ndev; d++)
            for (int md = 0; md <= HTML_FLAME_OOM; md++)
                free(v->dev[d][md].v);
    free(v->dev);
    free(v->stacks);
    free(v->lines);
    hmap_free(&v->by_group);
    hmap_free(&v->by_label);
    arena_free(&v->arena);
}

/* ---- the site table's lines and the timeline's bands ---- */

static const enum holders_moment moment_of[HTML_FLAME_OOM + 1] = {HOLDERS_PEAK, HOLDERS_NOW,
                                                                  HOLDERS_OOM};

static void moments_free(struct holders h[], const bool got[])
{
    for (int k = 0; k <= HTML_FLAME_OOM; k++)
        if (got[k])
            holders_free(&h[k]);
}

/* The holders of device dv at each moment (HTML_FLAME_*; the failure's
 * only on the failing device), got[k] false where the file has none.  0,
 * or -1 when out of memory (nothing to free then). */
static int moments_get(struct snapshot *s, const struct snap_device *dv, struct holders h[],
                       bool got[])
{
    bool oom = s->oom.present && s->oom.device == dv->ordinal;
    for (int k = 0; k <= HTML_FLAME_OOM; k++) {
        const struct snap_device *at = k == HTML_FLAME_OOM ? NULL : dv;
        got[k] = (k != HTML_FLAME_OOM || oom) && holders_have_tensors(s, at, moment_of[k]);
        if (got[k] && holders_get(s, at, moment_of[k], false, &h[k]) != 0) {
            got[k] = false;
            moments_free(h, got);
            return -1;
        }
    }
    return 0;
}

/* The line labelled `label` (its stack: group g's, or a marker frame of
 * the label when g is NULL), added when new; SIZE_MAX when out of memory. */
static size_t line_of(struct html_tview *v, struct snapshot *s, const char *label,
                      const struct snap_tgroup *g)
{
    uint32_t r;
    if (hmap_get_or_add(&v->by_label, label, strlen(label), (uint32_t)v->nlines, &r, NULL))
        return SIZE_MAX;
    if (r != v->nlines)
        return r;
    uint32_t f = g ? 0 : marker(s, label);
    uint32_t st = g ? group_stack(v, s, g)
                    : f == FRAMES_NONE ? UINT32_MAX : add_stack(v, NULL, 1, f);
    if (st == UINT32_MAX ||
        snapshot_vec_reserve((void **)&v->lines, &v->lines_cap, sizeof *v->lines, v->nlines + 1))
        return SIZE_MAX;
    v->lines[v->nlines] = (struct html_tline){.label = label, .stack = st};
    return v->nlines++;
}

/* The site table's lines: each device's holders by moment, then the
 * writer's folded tail, then PyTorch's cache. */
static int tensor_lines(struct html_tview *v, struct snapshot *s)
{
    for (size_t d = 0; d < s->ndevices; d++) {
        struct holders h[HTML_FLAME_OOM + 1];
        bool got[HTML_FLAME_OOM + 1];
        if (moments_get(s, &s->devices[d], h, got) != 0)
            return -1;
        int rc = 0;
        for (int k = 0; rc == 0 && k <= HTML_FLAME_OOM; k++) {
            if (!got[k])
                continue;
            v->known[k] = true;
            const struct holders *x = &h[k];
            char more[64];
            snprintf(more, sizeof more, "[%" PRIu64 " more lines]", x->more_groups);
            for (size_t i = 0; i < x->n + 2; i++) {
                bool tail = i == x->n, cache = i == x->n + 1;
                if ((tail && !x->has_more) ||
                    (cache && !(x->has_cache && x->cache_bytes != SNAP_UNKNOWN)))
                    continue;
                const char *label = tail ? snapshot_intern(s->ctx, more, strlen(more))
                                    : cache ? "[PyTorch's cache]" : x->v[i].display;
                size_t r = label ? line_of(v, s, label, tail || cache ? NULL : x->v[i].group)
                                 : SIZE_MAX;
                if (r == SIZE_MAX) {
                    rc = -1;
                    break;
                }
                uint64_t *b = &v->lines[r].bytes[k];
                *b = html_sat_add(*b, tail    ? x->more_bytes
                                      : cache ? x->cache_bytes
                                              : x->v[i].bytes);
            }
        }
        moments_free(h, got);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static int by_reading_time(const void *a, const void *b)
{
    int64_t x = ((const struct html_reading *)a)->t_ns;
    int64_t y = ((const struct html_reading *)b)->t_ns;
    return (x > y) - (x < y);
}

void html_readings_free(struct html_reading *rd, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(rd[i].v);
    free(rd);
}

int html_tview_bands(const struct html_tview *v, struct snapshot *s, size_t d, uint32_t *bands,
                     size_t *nb, struct html_reading **rd, size_t *nrd)
{
    const struct snap_device *dv = &s->devices[d];
    struct holders h[HTML_FLAME_OOM + 1];
    bool got[HTML_FLAME_OOM + 1];
    *nb = *nrd = 0;
    *rd = NULL;
    int rc = moments_get(s, dv, h, got);
    if (rc != 0)
        return rc;
    int from = got[HTML_FLAME_PEAK] ? HTML_FLAME_PEAK : got[HTML_FLAME_OOM] ? HTML_FLAME_OOM
                                                                             : HTML_FLAME_LIVE;
    for (size_t i = 0; got[from] && i < h[from].n && *nb < HTML_BANDS; i++) {
        uint32_t r;
        const char *label = h[from].v[i].display;
        if (hmap_find(&v->by_label, label, strlen(label), &r))
            bands[(*nb)++] = r;
    }
    /* the readings: the layer's between dumps, the peak, the failure, the
     * dump (that order before sorting: equal times keep it) */
    const struct snap_series *sr = &dv->tensor_series;
    size_t nser = sr->present ? sr->n : 0;
    static const int moments[] = {HTML_FLAME_PEAK, HTML_FLAME_OOM, HTML_FLAME_LIVE};
    int64_t when[HTML_FLAME_OOM + 1] = {
        got[HTML_FLAME_PEAK] ? h[HTML_FLAME_PEAK].time_ns : SNAP_UNKNOWN_I64,
        s->process.dump_time_ns, got[HTML_FLAME_OOM] ? s->oom.time_ns : SNAP_UNKNOWN_I64};
    if (*nb > 0 && (*rd = calloc(3 + nser, sizeof **rd)) == NULL)
        rc = -1;
    for (size_t i = 0; rc == 0 && *rd != NULL && i < nser + 3; i++) {
        int k = i < nser ? -1 : moments[i - nser];
        int64_t t = k < 0 ? sr->v[i].time_ns : when[k];
        if (t == SNAP_UNKNOWN_I64 || (k >= 0 && !got[k]))
            continue;
        struct html_reading *x = &(*rd)[(*nrd)++];
        x->t_ns = t;
        if ((x->v = calloc(*nb, sizeof *x->v)) == NULL) {
            rc = -1;
            break;
        }
        size_t nl = k < 0 ? sr->nlines : h[k].n;
        for (size_t b = 0; b < *nb; b++)
            for (size_t j = 0; j < nl; j++)
                if (strcmp(k < 0 ? holders_series_name(s, sr, j, true) : h[k].v[j].display,
                           v->lines[bands[b]].label) == 0)
                    x->v[b] += (int64_t)(k < 0 ? sr->v[i].bytes[j] : h[k].v[j].bytes);
    }
    moments_free(h, got);
    if (rc == 0 && *rd != NULL)
        qsort(*rd, *nrd, sizeof **rd, by_reading_time);
    if (rc != 0 || *nrd == 0) {
        html_readings_free(*rd, *nrd);
        *rd = NULL;
        *nrd = 0;
    }
    return rc;
}
