/* html_tensors.c - PyTorch's own figures in the HTML page's model: its
 * tensors' peak (max_memory_allocated) beside each device's peak, which
 * counts what it reserved, and who holds its memory - the tensor model's
 * holders by the user's line (holders.h: every line, the cache row, the
 * growth) or, in older files, the live tensors of its history's
 * top_tensors - drawn by html/tensors.js. */
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
    json_out_key(w, "peak_allocated");
    json_out_u64(w, peak);
    json_out_key(w, "allocated");
    json_out_u64(w, a->allocated_bytes);
    json_out_key(w, "reserved");
    json_out_u64(w, a->reserved_bytes);
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
    json_out_key(w, "total");
    json_out_u64(w, h.total_bytes);
    json_out_key(w, "count");
    json_out_u64(w, h.total_count);
    json_out_key(w, "step");
    json_out_i64(w, h.step);
    json_out_key(w, "time_ns");
    json_out_i64(w, h.time_ns);
    json_out_key(w, "cache");
    if (h.has_cache && h.cache_bytes != SNAP_UNKNOWN) {
        json_out_begin_array(w);
        json_out_u64(w, h.cache_bytes);
        json_out_u64(w, h.cache_segments);
        json_out_u64(w, h.cache_largest_free);
        json_out_end_array(w);
    } else {
        json_out_null(w);
    }
    json_out_key(w, "more");
    if (h.has_more) {
        json_out_begin_array(w);
        json_out_u64(w, h.more_groups);
        json_out_u64(w, h.more_bytes);
        json_out_u64(w, h.more_count);
        json_out_end_array(w);
    } else {
        json_out_null(w);
    }
    json_out_key(w, "rows");
    json_out_begin_array(w);
    char callers[4096];
    for (size_t i = 0; i < h.n; i++) {
        const struct holder *x = &h.v[i];
        size_t used = 0;
        callers[0] = '\0';
        uint32_t k = 0;
        while (k < x->nframes && x->frames[k] != x->label)
            k++;
        for (uint32_t j = k + 1; x->label != SNAP_NO_FRAME && j < x->nframes; j++) {
            const char *name = s->ctx->frames[x->frames[j]].display;
            size_t n = strlen(name);
            if (used + n + 4 >= sizeof callers)
                break;
            if (used > 0) {
                memcpy(callers + used, " < ", 3);
                used += 3;
            }
            memcpy(callers + used, name, n + 1);
            used += n;
        }
        json_out_begin_array(w);
        json_out_string(w, x->display);
        json_out_u64(w, x->bytes);
        json_out_u64(w, x->count);
        json_out_string(w, callers);
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

uint32_t html_tview_stack(struct html_tview *v, struct snapshot *s, const struct snap_tgroup *g)
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
            add_row(m, html_tview_stack(v, s, &t->v[i]), t->v[i].bytes, t->v[i].count) != 0)
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

int html_tview_build(struct html_tview *v, struct snapshot *s)
{
    memset(v, 0, sizeof *v);
    v->base = (uint32_t)s->nstacks;
    arena_init(&v->arena);
    hmap_init(&v->by_group, &v->arena);
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
    return 0;
}

void html_tview_free(struct html_tview *v)
{
    if (v->dev != NULL)
        for (size_t d = 0; d < v->ndev; d++)
            for (int md = 0; md <= HTML_FLAME_OOM; md++)
                free(v->dev[d][md].v);
    free(v->dev);
    free(v->stacks);
    hmap_free(&v->by_group);
    arena_free(&v->arena);
}

uint32_t html_tview_marker(struct html_tview *v, struct snapshot *s, const char *name)
{
    uint32_t f = marker(s, name);
    return f == FRAMES_NONE ? UINT32_MAX : add_stack(v, NULL, 1, f);
}
