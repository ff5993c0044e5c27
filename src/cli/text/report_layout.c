/* report_layout.c - where this process's allocations lay in the failing
 * device's address space, from oom.layout.  Information only: a GPU's MMU
 * maps scattered physical pages, so gaps between addresses do not decide
 * whether a request fits (oom_text.h), and the line claims nothing of it. */
#include "report_layout.h"

#include <inttypes.h>
#include <string.h>

#include "oom_causes.h"
#include "out.h"

/* "10.0 MiB, 6.00 MiB and 4.00 MiB": the largest gaps, at most
 * REPORT_LAYOUT_GAPS of them, into buf; "" without a layout or gaps. */
static const char *report_layout_gaps(const struct snap_layout *l, char *buf, size_t n)
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
    if (!l->present || !oom_cause_row(o->cause)->shows_layout || l->count == 0)
        return;
    char a[OUT_NUM], b[OUT_NUM], gaps[256], text[768];
    const char *only = "addresses only: physical pages need not be contiguous";
    if (l->gap_count == 0) {
        snprintf(text, sizeof text,
                 "this process's %" PRIu64 " allocation%s sit%s side by side over %s (%s)",
                 l->count, l->count == 1 ? "" : "s", l->count == 1 ? "s" : "",
                 out_bytes(l->span_bytes, a), only);
    } else {
        snprintf(text, sizeof text,
                 "this process's %" PRIu64 " allocation%s %s with %" PRIu64 " gap%s "
                 "(%s) between them; the largest: %s (%s)",
                 l->count, l->count == 1 ? " spans" : "s span", out_bytes(l->span_bytes, a),
                 l->gap_count, l->gap_count == 1 ? "" : "s", out_bytes(l->gap_bytes, b),
                 report_layout_gaps(l, gaps, sizeof gaps), only);
    }
    out_wrap(f, "  layout:   ", "            ", text);
}
