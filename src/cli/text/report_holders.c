/* report_holders.c - the text of who holds memory: PyTorch's tensors by
 * the user's line, their cache, the growth by line (report_holders.h). */
#include "report_holders.h"

#include <inttypes.h>
#include <string.h>

#include "frame_filter.h"
#include "out.h"

#define CALLERS_SHOWN 3 /* frames after the line, as the call-site tables */

int report_holders_table(FILE *f, struct snapshot *s, const struct holders *h, uint64_t whole,
                         unsigned rows, int indent)
{
    bool full = OUT_WIDTH >= OUT_WIDTH_FULL;
    struct out_table t;
    out_table_init(&t, "rrrl", indent);
    out_table_row(&t, "bytes", "%", "blocks", "line");
    size_t shown = rows == 0 || h->n <= rows ? h->n : rows - 1; /* the fold takes a row */
    uint64_t rest_bytes = 0, rest_count = 0;
    char b[OUT_NUM], p[OUT_NUM], c[32], via[8192];
    for (size_t i = 0; i < h->n; i++) {
        const struct holder *x = &h->v[i];
        if (i >= shown) {
            rest_bytes += x->bytes;
            rest_count += x->count;
            continue;
        }
        snprintf(c, sizeof c, "%" PRIu64, x->count);
        out_table_row(&t, out_bytes(x->bytes, b), out_pct(x->bytes, whole, p), c, x->display);
        holders_callers(s, x, full ? UINT32_MAX : CALLERS_SHOWN, full, via, sizeof via);
        if (via[0])
            out_table_note(&t, via);
    }
    if (shown < h->n) {
        char more[96];
        snprintf(c, sizeof c, "%" PRIu64, rest_count);
        snprintf(more, sizeof more, "(%zu more lines; --full lists them)", h->n - shown);
        out_table_row(&t, out_bytes(rest_bytes, b), out_pct(rest_bytes, whole, p), c, more);
    }
    if (h->has_more) {
        char more[96];
        snprintf(c, sizeof c, "%" PRIu64, h->more_count);
        snprintf(more, sizeof more, "(%" PRIu64 " more lines, folded by the writer)",
                 h->more_groups);
        out_table_row(&t, out_bytes(h->more_bytes, b), out_pct(h->more_bytes, whole, p), c,
                      more);
    }
    return out_table_print(&t, f);
}

void report_holders_cache(FILE *f, const struct holders *h, const char *tail, int indent)
{
    if (!h->has_cache)
        return;
    char a[OUT_NUM], b[OUT_NUM], segs[48] = "", largest[OUT_NUM + 32] = "", text[256], lead[32];
    if (h->cache_segments != SNAP_UNKNOWN)
        snprintf(segs, sizeof segs, " in %" PRIu64 " segment%s", h->cache_segments,
                 out_plural(h->cache_segments));
    if (h->cache_largest_free != SNAP_UNKNOWN)
        snprintf(largest, sizeof largest, ", largest free block %s",
                 out_bytes(h->cache_largest_free, b));
    snprintf(text, sizeof text, "PyTorch's cache: %s%s%s%s", out_bytes(h->cache_bytes, a), segs,
             largest, tail ? tail : "");
    snprintf(lead, sizeof lead, "%*s", indent, "");
    char rest[40];
    snprintf(rest, sizeof rest, "%*s", indent + 2, "");
    out_wrap(f, lead, rest, text);
}

int report_holders_growth(FILE *f, struct snapshot *s, const struct snap_device *d, int indent)
{
    struct holders g;
    if (holders_growth(s, d, &g) != 0)
        return -1;
    if (g.source == HOLDERS_NONE)
        return 0;
    char lead[32], rest[40];
    snprintf(lead, sizeof lead, "%*s", indent + 2, "");
    snprintf(rest, sizeof rest, "%*s", indent + 4, "");
    char head[128], first[32];
    snprintf(head, sizeof head, "Growth by line (live tensors that grew step over step):%s",
             g.n > 0 ? "" : frame_filter_focus_text() != NULL ? " none in focus" : " none");
    snprintf(first, sizeof first, "%*s", indent, "");
    out_wrap(f, first, rest, head);
    for (size_t i = 0; i < g.n; i++) {
        const struct holder *x = &g.v[i];
        const struct snap_tgroup *r = x->group;
        char a[OUT_NUM], now[OUT_NUM], steps[96] = "", text[1024];
        if (r->first_step != SNAP_UNKNOWN_I64 && r->last_step != SNAP_UNKNOWN_I64)
            snprintf(steps, sizeof steps, ", steps %" PRId64 "-%" PRId64, r->first_step,
                     r->last_step);
        if (r->bytes_per_step != SNAP_UNKNOWN)
            snprintf(text, sizeof text, "+%s a step at %s%s, %s now",
                     out_bytes(r->bytes_per_step, a), x->display, steps, out_bytes(x->bytes, now));
        else
            snprintf(text, sizeof text, "%s%s, %s now", x->display, steps,
                     out_bytes(x->bytes, now));
        out_wrap(f, lead, rest, text);
    }
    holders_free(&g);
    return 0;
}
