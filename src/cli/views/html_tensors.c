/* html_tensors.c - PyTorch's own figures in the HTML page's model: its
 * tensors' peak (max_memory_allocated) beside each device's peak, which
 * counts what it reserved, and who holds its memory - the tensor model's
 * holders by the user's line (holders.h: every line, the cache row, the
 * growth) or, in older files, the live tensors of its history's
 * top_tensors - drawn by html/tensors.js. */
#include <string.h>

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
