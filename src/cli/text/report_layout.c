/* report_layout.c - where the failing device's memory is cut into pieces,
 * from oom.layout: the gaps between this process's allocations are the most
 * the holes there can be (memory no hook sees may sit in them), so "no gap
 * fits" says that no hole among our allocations fits either. */
#include "report_layout.h"

#include <inttypes.h>
#include <string.h>

#include "out.h"

const char *report_layout_gaps(const struct snap_layout *l, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    if (!l->present)
        return buf;
    size_t shown = l->ngaps < REPORT_LAYOUT_GAPS ? l->ngaps : REPORT_LAYOUT_GAPS;
    for (size_t i = 0; i < shown && used < n; i++) {
        char b[OUT_NUM];
        const char *sep = i == 0 ? "" : i + 1 == shown && shown == l->gap_count ? " and " : ", ";
        int k = snprintf(buf + used, n - used, "%s%s", sep, out_bytes(l->gaps[i].bytes, b));
        if (k < 0 || (size_t)k >= n - used)
            break;
        used += (size_t)k;
    }
    if (shown < l->gap_count && used < n)
        snprintf(buf + used, n - used, ", ...");
    return buf;
}

void report_layout_lines(FILE *f, const struct snap_oom *o)
{
    const struct snap_layout *l = &o->layout;
    if (!l->present || o->cause != CAUSE_FRAGMENTATION || l->count == 0)
        return;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], gaps[256], text[768];
    if (l->gap_count == 0) {
        snprintf(text, sizeof text,
                 "this process's %" PRIu64 " allocations sit side by side over %s, no gap "
                 "between them: the free memory lies outside them",
                 l->count, out_bytes(l->span_bytes, a));
    } else {
        char verdict[160];
        if (l->gaps_at_least_request == 0)
            snprintf(verdict, sizeof verdict, "none fits the %s request",
                     out_bytes(o->requested_bytes, c));
        else
            snprintf(verdict, sizeof verdict,
                     "%" PRIu64 " %s at least the %s request, so memory no hook sees "
                     "fills %s",
                     l->gaps_at_least_request, l->gaps_at_least_request == 1 ? "is" : "are",
                     out_bytes(o->requested_bytes, c),
                     l->gaps_at_least_request == 1 ? "it" : "them");
        snprintf(text, sizeof text,
                 "this process's %" PRIu64 " allocations span %s with %" PRIu64 " gap%s "
                 "(%s) between them; the largest: %s - %s",
                 l->count, out_bytes(l->span_bytes, a), l->gap_count,
                 l->gap_count == 1 ? "" : "s", out_bytes(l->gap_bytes, b),
                 report_layout_gaps(l, gaps, sizeof gaps), verdict);
    }
    out_wrap(f, "  layout:   ", "            ", text);
}
