/* report_phases.c - `cumemtrace report --by range`: the peak's live bytes
 * per range of the program's own phases, exact as for call sites (the
 * writer adds them up from sites keyed by phase), each with the call site
 * that held most of it then. */
#include "report_phases.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "frames.h"
#include "out.h"
#include "snapshot_phases.h"

static int row_order(const void *a, const void *b)
{
    const struct snap_phase_row *x = *(const struct snap_phase_row *const *)a;
    const struct snap_phase_row *y = *(const struct snap_phase_row *const *)b;
    if (x->at_peak_bytes != y->at_peak_bytes)
        return x->at_peak_bytes > y->at_peak_bytes ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (x->phase > y->phase) - (x->phase < y->phase);
}

const struct snap_phase_row **report_phases_sorted(const struct snap_phase_rows *rows)
{
    const struct snap_phase_row **v = malloc((rows->n ? rows->n : 1) * sizeof *v);
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < rows->n; i++)
        v[i] = &rows->v[i];
    qsort(v, rows->n, sizeof *v, row_order);
    return v;
}

int report_phases(FILE *f, struct snapshot *s, const struct snap_phase_rows *rows,
                  uint64_t peak, unsigned top)
{
    if (!rows->present || rows->n == 0)
        return 0;
    const struct snap_phase_row **v = report_phases_sorted(rows);
    if (v == NULL)
        return -1;
    char a[OUT_NUM];
    fprintf(f, "  %sRanges at peak (%s)%s\n", out_color(OUT_BOLD), out_bytes(peak, a),
            out_color(OUT_RESET));
    struct out_table t;
    out_table_init(&t, "rrrrrl", 2);
    out_table_row(&t, "at peak", "%", "count", "now", "allocs", "range");
    size_t shown = rows->n < top ? rows->n : top;
    uint64_t rest_peak = 0, rest_now = 0, rest_count = 0, rest_allocs = 0;
    for (size_t i = 0; i < rows->n; i++) {
        const struct snap_phase_row *r = v[i];
        if (i >= shown) {
            rest_peak += r->at_peak_bytes;
            rest_now += r->bytes;
            rest_count += r->at_peak_count;
            rest_allocs += r->allocs;
            continue;
        }
        char b[OUT_NUM], p[OUT_NUM], c[OUT_NUM], n[OUT_NUM], al[OUT_NUM];
        snprintf(c, sizeof c, "%" PRIu64, r->at_peak_count);
        snprintf(al, sizeof al, "%" PRIu64, r->allocs);
        out_table_row(&t, out_bytes(r->at_peak_bytes, b), out_pct(r->at_peak_bytes, peak, p), c,
                      out_bytes(r->bytes, n), al,
                      snapshot_display(s->ctx, snapshot_phase_path(s, r->phase)));
        if (r->ntop > 0 && r->at_peak_bytes > 0) {
            const struct snap_group *g = &r->top[0];
            uint32_t id = frames_site(s, g->stack, BY_STACK);
            char note[1024], gb[OUT_NUM];
            if (id != FRAMES_NONE) {
                snprintf(note, sizeof note, "most at peak: %s from %s", out_bytes(g->bytes, gb),
                         frames_site_get(s->ctx, BY_STACK, id)->display);
                out_table_note(&t, note);
            }
        }
    }
    if (rows->n > shown) {
        char b[OUT_NUM], p[OUT_NUM], c[OUT_NUM], n[OUT_NUM], al[OUT_NUM], more[64];
        snprintf(c, sizeof c, "%" PRIu64, rest_count);
        snprintf(al, sizeof al, "%" PRIu64, rest_allocs);
        snprintf(more, sizeof more, "(%zu more ranges)", rows->n - shown);
        out_table_row(&t, out_bytes(rest_peak, b), out_pct(rest_peak, peak, p), c,
                      out_bytes(rest_now, n), al, more);
    }
    free(v);
    int rc = out_table_print(&t, f);
    if (s->phases.overflow > 0)
        fprintf(f, "  %" PRIu64 " range%s came after 16384 distinct paths and count under "
                   "\"%s\" (their names are not kept)\n", s->phases.overflow,
                s->phases.overflow == 1 ? "" : "s",
                snapshot_display(s->ctx, snapshot_phase_path(s, 1)));
    return rc;
}

void report_phases_hint(FILE *f, const struct snapshot *s, const struct snap_phase_rows *rows)
{
    if (!rows->present || rows->n == 0)
        return;
    size_t named = 0;
    for (size_t i = 0; i < rows->n; i++)
        named += rows->v[i].phase != 0;
    char text[1024];
    snprintf(text, sizeof text, "%zu range%s of the program allocated here; `cumemtrace "
             "report --by range %s` shows the peak by range", named, named == 1 ? "" : "s",
             snapshot_display(s->ctx, s->file));
    out_wrap(f, "  ", "    ", text);
}
