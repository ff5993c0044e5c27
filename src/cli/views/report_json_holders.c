/* report_json_holders.c - `report --json`'s holders and growth, the same
 * groups as the text report, and the schema rows both report --json files
 * print (report_json_holders.h). */
#include "report_json_holders.h"

static void frame_list(struct json_out *w, const struct snapshot *s, const struct holder *h)
{
    json_out_begin_array(w);
    for (uint32_t i = 0; i < h->nframes; i++)
        json_out_string(w, s->ctx->frames[h->frames[i]].name);
    json_out_end_array(w);
}

void report_json_rows(struct json_out *w, const void *obj, const struct row *t, size_t n,
                      int run)
{
    for (size_t i = 0; i < n; i++) {
        if (t[i].run != run)
            continue;
        const void *at = (const char *)obj + t[i].off;
        json_out_key(w, t[i].key);
        switch (t[i].kind) {
        case V_U64: json_out_u64(w, *(const uint64_t *)at); break;
        case V_I64: json_out_i64(w, *(const int64_t *)at); break;
        case V_BOOL: json_out_tribool(w, *(const int *)at); break;
        default: json_out_string(w, *(const char *const *)at); break;
        }
    }
}

static const struct row origin_rows[] = {SNAP_ORIGIN_SCHEMA(ROW)};
static const struct row growth_rows[] = {SNAP_GROWTH_SCHEMA(ROW)};

void report_json_origin(struct json_out *w, const struct snapshot *s,
                        const struct snap_origin *o, const char *sentence)
{
    if (o == NULL || o->thread == NULL) {
        json_out_null(w);
        return;
    }
    json_out_begin_object(w);
    ROWS(w, o, origin_rows, 1);
    json_out_key(w, "forward_line");
    json_out_string(w, o->forward_site != SNAP_NO_FRAME ? s->ctx->frames[o->forward_site].name
                                                        : NULL);
    if (sentence != NULL)
        json_out_key_string(w, "sentence", sentence);
    json_out_end_object(w);
}

/* The members every holder has: line (the identity, full path; null
 * without a user line), display, frames, bytes, count. */
static void holder_members(struct json_out *w, const struct snapshot *s, const struct holder *h)
{
    json_out_key(w, "line");
    json_out_string(w, h->label != SNAP_NO_FRAME ? s->ctx->frames[h->label].name
                       : h->stack != SNAP_NO_STACK ? h->name : NULL);
    json_out_key_string(w, "display", h->display);
    json_out_key(w, "frames"); frame_list(w, s, h);
    json_out_key_u64(w, "bytes", h->bytes);
}

int report_json_holders(struct json_out *w, struct snapshot *s, const struct snap_device *d,
                        enum holders_moment m, unsigned top)
{
    struct holders h;
    if (holders_get(s, d, m, false, &h) != 0)
        return -1;
    if (h.source == HOLDERS_NONE) {
        json_out_null(w);
        return 0;
    }
    json_out_begin_object(w);
    json_out_key_string(w, "source", h.source == HOLDERS_TENSORS ? "tensors" : "segments");
    json_out_key_u64(w, "total_bytes", h.total_bytes);
    json_out_key_u64(w, "total_count", h.total_count);
    json_out_key_i64(w, "time_ns", h.time_ns);
    json_out_key_i64(w, "step", h.step);
    size_t shown = top == 0 || h.n <= top ? h.n : top;
    json_out_key(w, "groups");
    json_out_begin_array(w);
    for (size_t i = 0; i < shown; i++) {
        const struct holder *x = &h.v[i];
        json_out_begin_object(w);
        holder_members(w, s, x);
        json_out_key_u64(w, "count", x->count);
        json_out_key(w, "origin");
        report_json_origin(w, s, x->group ? &x->group->origin : NULL, NULL);
        json_out_end_object(w);
    }
    json_out_end_array(w);
    uint64_t b = 0, c = 0;
    for (size_t i = shown; i < h.n; i++) {
        b += h.v[i].bytes;
        c += h.v[i].count;
    }
    static const char *const fold[] = {"groups", "bytes", "count"};
    static const char *const cache[] = {"bytes", "segments", "largest_free_bytes"};
    json_out_key_u64s(w, "rest", shown < h.n, fold, (uint64_t[3]){h.n - shown, b, c}, 3);
    json_out_key_u64s(w, "more", h.has_more, fold,
                      (uint64_t[3]){h.more_groups, h.more_bytes, h.more_count}, 3);
    json_out_key_u64s(w, "cache", h.has_cache, cache,
                      (uint64_t[3]){h.cache_bytes, h.cache_segments, h.cache_largest_free}, 3);
    json_out_end_object(w);
    holders_free(&h);
    return 0;
}

int report_json_growth(struct json_out *w, struct snapshot *s, const struct snap_device *d)
{
    struct holders g;
    if (holders_growth(s, d, &g) != 0)
        return -1;
    if (g.source == HOLDERS_NONE) {
        json_out_null(w);
        return 0;
    }
    json_out_begin_array(w);
    for (size_t i = 0; i < g.n; i++) {
        const struct holder *x = &g.v[i];
        json_out_begin_object(w);
        holder_members(w, s, x);
        ROWS(w, x->group, growth_rows, 1);
        json_out_end_object(w);
    }
    json_out_end_array(w);
    holders_free(&g);
    return 0;
}
