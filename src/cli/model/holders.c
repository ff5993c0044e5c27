/* holders.c - who holds a device's memory at one moment (holders.h):
 * PyTorch's groups by user line, or the driver's by stack. */
#include "holders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "sites.h"

#define NO_USER_FRAME "[no user frame]"

static bool prefer_segments; /* --segments */

void holders_set_segments(bool segments)
{
    prefer_segments = segments;
}

bool holders_segments(void)
{
    return prefer_segments;
}

/* The moment's tensors whatever --segments says (holders_tensors heeds it). */
static const struct snap_tensors *tensors_at(const struct snapshot *s,
                                             const struct snap_device *d,
                                             enum holders_moment m)
{
    switch (m) {
    case HOLDERS_OOM:
        return s->oom.present && s->oom.allocator.present ? &s->oom.allocator.tensors : NULL;
    case HOLDERS_PEAK:
        return d ? &d->peak_tensors : NULL;
    case HOLDERS_NOW:
        return d ? &d->tensors : NULL;
    }
    return NULL;
}

const struct snap_tensors *holders_tensors(const struct snapshot *s,
                                           const struct snap_device *d, enum holders_moment m)
{
    return prefer_segments ? NULL : tensors_at(s, d, m);
}

bool holders_have_tensors(const struct snapshot *s, const struct snap_device *d,
                          enum holders_moment m)
{
    const struct snap_tensors *t = holders_tensors(s, d, m);
    return t != NULL && t->present;
}

static const char *label_name(const struct snapshot *s, uint32_t label)
{
    return label == SNAP_NO_FRAME ? NO_USER_FRAME : s->ctx->frames[label].name;
}

static int by_label(const void *a, const void *b)
{
    uint32_t x = ((const struct holder *)a)->label, y = ((const struct holder *)b)->label;
    return (x > y) - (x < y);
}

static int by_bytes(const void *a, const void *b)
{
    const struct holder *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* A group of blocks made on autograd's thread, which has no Python
 * stack: named by the node and, where PyTorch gave it, the forward line
 * ("[backward of model.py:142:forward, MmBackward0]"); NULL when out of
 * memory. */
static const char *origin_text(struct snapshot *s, const struct snap_tgroup *g, bool display)
{
    char buf[1024];
    const char *fwd = g->origin.forward_site == SNAP_NO_FRAME ? NULL
                      : display ? s->ctx->frames[g->origin.forward_site].display
                                : s->ctx->frames[g->origin.forward_site].name;
    int n = snprintf(buf, sizeof buf, "[%s%s%s%s]", fwd ? "backward of " : "autograd's ",
                     fwd ? fwd : "backward thread", g->origin.node ? ", " : "",
                     g->origin.node ? g->origin.node : "");
    if (n < 0)
        return NULL;
    return snapshot_intern(s->ctx, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

const char *holders_group_name(struct snapshot *s, const struct snap_tgroup *g, bool display)
{
    if (g->label == SNAP_NO_FRAME && g->origin.thread != NULL)
        return origin_text(s, g, display);
    if (g->label == SNAP_NO_FRAME)
        return NO_USER_FRAME;
    return display ? s->ctx->frames[g->label].display : label_name(s, g->label);
}

static int holder_from_group(struct snapshot *s, struct holder *h, const struct snap_tgroup *g)
{
    memset(h, 0, sizeof *h);
    h->label = g->label;
    h->stack = SNAP_NO_STACK;
    if ((h->name = holders_group_name(s, g, false)) == NULL ||
        (h->display = holders_group_name(s, g, true)) == NULL)
        return -1;
    h->frames = g->frames;
    h->nframes = g->nframes;
    h->bytes = g->bytes;
    h->count = g->count;
    h->group = g;
    h->kind = KIND_DEVICE;
    return 0;
}

/* One holder a group of v[0..n) in out->v; -1 when out of memory. */
static int from_groups(struct snapshot *s, const struct snap_tgroup *v, size_t n,
                       struct holders *out)
{
    if (n > 0 && (out->v = malloc(n * sizeof *out->v)) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (holder_from_group(s, &out->v[i], &v[i]) != 0) {
            holders_free(out);
            return -1;
        }
    out->n = n;
    return 0;
}

/* The groups of t, one holder per label (two groups share one only where
 * --hide moved a line), largest first. */
static int from_tensors(struct snapshot *s, const struct snap_tensors *t,
                        struct holders *out)
{
    out->source = HOLDERS_TENSORS;
    out->total_bytes = t->allocated_bytes;
    out->total_count = t->count;
    out->has_more = t->has_more;
    out->more_groups = t->more_groups;
    out->more_bytes = t->more_bytes;
    out->more_count = t->more_count;
    out->has_cache = t->has_cache;
    out->cache_bytes = t->cache_bytes;
    out->cache_segments = t->cache_segments;
    out->cache_largest_free = t->cache_largest_free;
    out->time_ns = t->time_ns;
    out->step = t->step;
    if (t->n == 0)
        return 0;
    if (from_groups(s, t->v, t->n, out) != 0)
        return -1;
    qsort(out->v, t->n, sizeof *out->v, by_label);
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        struct holder *h = &out->v[i];
        /* no user line: each group stays apart (backward's name its node) */
        if (k > 0 && h->label != SNAP_NO_FRAME && out->v[k - 1].label == h->label) {
            struct holder *into = &out->v[k - 1];
            if (h->bytes > into->group->bytes) { /* the largest group speaks */
                into->group = h->group;
                into->frames = h->frames;
                into->nframes = h->nframes;
            }
            into->bytes += h->bytes;
            into->count += h->count;
            continue;
        }
        out->v[k++] = *h;
    }
    out->n = k;
    qsort(out->v, k, sizeof *out->v, by_bytes);
    for (size_t i = 0; i < k; i++) {
        out->bytes += out->v[i].bytes;
        out->count += out->v[i].count;
    }
    return 0;
}

/* The driver's groups summed by whole stack (as report has always listed
 * them), largest first. */
static int from_segments(struct snapshot *s, const struct snap_groups *g, uint64_t total,
                         struct holders *out)
{
    out->source = HOLDERS_SEGMENTS;
    out->total_bytes = total;
    out->time_ns = out->step = SNAP_UNKNOWN_I64;
    struct sites_sum sum;
    if (sites_sum_sorted(&sum, s, g) != 0)
        return -1;
    out->total_count = sum.total_count;
    if (sum.ntouched > 0 && (out->v = calloc(sum.ntouched, sizeof *out->v)) == NULL) {
        sites_free(&sum);
        return -1;
    }
    for (size_t i = 0; i < sum.ntouched; i++) {
        const struct site *site = frames_site_get(s->ctx, BY_STACK, sum.touched[i]);
        struct holder *h = &out->v[i];
        h->label = SNAP_NO_FRAME;
        h->stack = site->stack;
        h->name = site->label;
        h->display = site->display;
        if (site->stack != SNAP_NO_STACK && site->snap == s) {
            h->frames = s->stacks[site->stack].frames;
            h->nframes = s->stacks[site->stack].nframes;
        }
        h->bytes = sites_bytes(&sum, sum.touched[i]);
        h->count = sites_count(&sum, sum.touched[i]);
        h->kind = KIND_DEVICE;
        for (int k = 0; k < KIND_COUNT; k++)
            if (sum.kinds[sum.touched[i]] & (1u << k)) {
                h->kind = (uint8_t)k;
                break;
            }
        out->bytes += h->bytes;
        out->count += h->count;
    }
    out->n = sum.ntouched;
    sites_free(&sum);
    return 0;
}

int holders_get(struct snapshot *s, const struct snap_device *d, enum holders_moment m,
                bool segments, struct holders *out)
{
    memset(out, 0, sizeof *out);
    out->time_ns = out->step = SNAP_UNKNOWN_I64;
    out->cache_segments = out->cache_largest_free = SNAP_UNKNOWN;
    if (m == HOLDERS_OOM && d == NULL && s->oom.present)
        d = snapshot_device(s, s->oom.device);
    const struct snap_tensors *t = holders_tensors(s, d, m);
    if (!segments && !prefer_segments && t != NULL && t->present)
        return from_tensors(s, t, out);
    switch (m) {
    case HOLDERS_OOM:
        return s->oom.present ? from_segments(s, &s->oom.live, s->oom.tracked_bytes, out) : 0;
    case HOLDERS_PEAK:
        return d ? from_segments(s, &d->at_peak, d->peak_bytes, out) : 0;
    case HOLDERS_NOW:
        return d ? from_segments(s, &d->live, d->current_bytes, out) : 0;
    }
    return 0;
}

int holders_growth(struct snapshot *s, const struct snap_device *d, struct holders *out)
{
    memset(out, 0, sizeof *out);
    out->time_ns = out->step = SNAP_UNKNOWN_I64;
    out->cache_segments = out->cache_largest_free = SNAP_UNKNOWN;
    if (d == NULL || !d->growth.present)
        return 0;
    out->source = HOLDERS_TENSORS;
    if (from_groups(s, d->growth.v, d->growth.n, out) != 0)
        return -1;
    for (size_t i = 0; i < out->n; i++)
        out->bytes += out->v[i].bytes;
    out->total_bytes = out->bytes;
    return 0;
}

/* Appends frames[from..to) to buf at *used, the first after `first`, the
 * others after " < "; false when buf filled up (the last frame cut). */
static bool put_frames(const struct snapshot *s, const uint32_t *frames, uint32_t from,
                       uint32_t to, const char *first, char *buf, size_t n, size_t *used)
{
    for (uint32_t i = from; i < to; i++) {
        int w = snprintf(buf + *used, n - *used, "%s%s", i == from ? first : " < ",
                         s->ctx->frames[frames[i]].display);
        if (w < 0 || (size_t)w >= n - *used)
            return false;
        *used += (size_t)w;
    }
    return true;
}

const char *holders_callers(const struct snapshot *s, const struct holder *h, unsigned max,
                            bool whole, char *buf, size_t n)
{
    buf[0] = '\0';
    uint32_t pos = 0;
    while (pos < h->nframes && h->frames[pos] != h->label)
        pos++;
    size_t used = 0;
    if (pos == h->nframes) { /* no line: the stack as it is */
        if (h->label == SNAP_NO_FRAME)
            put_frames(s, h->frames, 0, h->nframes < max ? h->nframes : max, "in ", buf, n,
                       &used);
        return buf;
    }
    if (whole && pos > 0) {
        if (!put_frames(s, h->frames, 0, pos, "from ", buf, n, &used))
            return buf;
        int w = snprintf(buf + used, n - used, " in the line;");
        if (w < 0 || (size_t)w >= n - used)
            return buf;
        used += (size_t)w;
    }
    uint32_t after = h->nframes - pos - 1;
    put_frames(s, h->frames, pos + 1, pos + 1 + (after < max ? after : max),
               used ? " < " : "< ", buf, n, &used);
    return buf;
}

void holders_free(struct holders *h)
{
    free(h->v);
    h->v = NULL;
    h->n = 0;
}

const char *holders_series_name(const struct snapshot *s, const struct snap_series *sr,
                                size_t j, bool display)
{
    uint32_t f = sr->lines[j];
    return display && f != SNAP_NO_FRAME ? s->ctx->frames[f].display : label_name(s, f);
}
