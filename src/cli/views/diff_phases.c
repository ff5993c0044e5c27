/* diff_phases.c - `cumemtrace diff --by range`: what each of the program's
 * ranges (NVTX, PyTorch's phases) held at the peak in two runs.  Ranges
 * match by path ("validation/step 1200"), which survives a rebuild; the
 * figures are the snapshots' by_phase rows, exact at each device's peak,
 * summed over devices as the call-site diff sums them.  The table printer
 * also serves the diff of two jobs, a rank per row (ranks_diff.c). */
#include "diff_phases.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "snapshot_phases.h"

struct entry {
    const char *path;
    int side; /* 0 base, 1 new */
    uint64_t peak, live;
};

static int by_path(const void *x, const void *y)
{
    const struct entry *a = x, *b = y;
    int c = strcmp(a->path, b->path);
    return c ? c : a->side - b->side;
}

static uint64_t magnitude(const struct diff_range *r)
{
    return r->now > r->base ? r->now - r->base : r->base - r->now;
}

static int by_change(const void *x, const void *y)
{
    const struct diff_range *a = x, *b = y;
    uint64_t da = magnitude(a), db = magnitude(b);
    if (da != db)
        return da > db ? -1 : 1;
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return strcmp(a->path, b->path);
}

static size_t rows_of(const struct snapshot *s)
{
    size_t n = s->host.by_phase.n;
    for (size_t d = 0; d < s->ndevices; d++)
        n += s->devices[d].by_phase.n;
    return n;
}

static void add_rows(struct entry *e, size_t *n, const struct snapshot *s, int side,
                     const struct snap_phase_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++)
        e[(*n)++] = (struct entry){snapshot_phase_path(s, rows->v[i].phase), side,
                                   rows->v[i].at_peak_bytes, rows->v[i].bytes};
}

void diff_ranges_print(FILE *f, struct diff_range *v, size_t n, unsigned top, bool live,
                       bool jobs)
{
    qsort(v, n, sizeof *v, by_change);
    fputc('\n', f);
    fprintf(f, "%s%s%s\n", out_color(OUT_BOLD),
            live ? jobs ? "Live by range on each rank when the snapshots were taken (at "
                          "exit: leaks)"
                        : "Live by range when the snapshots were taken (at exit: leaks)"
                 : jobs ? "Ranges at each rank's peak, largest change first"
                        : "Ranges at peak, largest change first",
            out_color(OUT_RESET));
    const char *what = jobs ? "rank's range" : "range";
    const char *whats = jobs ? "ranks' ranges" : "ranges";
    size_t changed = 0, unchanged = 0;
    int64_t rest = 0;
    struct out_table t;
    out_table_init(&t, jobs ? "rrrlll" : "rrrll", 2);
    if (jobs)
        out_table_row(&t, "base", "new", "change", "", "rank", "range");
    else
        out_table_row(&t, "base", "new", "change", "", "range");
    for (size_t i = 0; i < n; i++) {
        int64_t delta = out_delta(v[i].base, v[i].now);
        if (delta == 0 && v[i].in_a && v[i].in_b) {
            unchanged++;
            continue;
        }
        if (changed++ >= top) {
            rest += delta;
            continue;
        }
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM];
        const char *mark = !v[i].in_a ? "NEW" : !v[i].in_b ? "GONE" : "";
        if (jobs)
            out_table_row(&t, out_bytes(v[i].base, x), out_bytes(v[i].now, y),
                          out_sbytes(delta, c), mark, v[i].who, v[i].path);
        else
            out_table_row(&t, out_bytes(v[i].base, x), out_bytes(v[i].now, y),
                          out_sbytes(delta, c), mark, v[i].path);
    }
    if (changed == 0) {
        out_table_free(&t);
        fprintf(f, "  no %s changed\n", jobs ? "range of any rank" : "range");
    } else {
        out_table_print(&t, f);
    }
    if (changed > top) {
        char c[OUT_NUM];
        fprintf(f, "  (%zu more changed %s, %s in total)\n", changed - top, whats,
                out_sbytes(rest, c));
    }
    if (unchanged > 0)
        fprintf(f, "  (%zu %s unchanged)\n", unchanged, unchanged == 1 ? what : whats);
}

void diff_ranges_none(FILE *f, bool jobs)
{
    fprintf(f, "\nNeither %s opened a range (NVTX, PyTorch's phases, "
               "cumemtrace_phase_push): nothing to compare by range\n",
            jobs ? "job" : "run");
}

int diff_phases(FILE *f, struct snapshot *a, struct snapshot *b, unsigned top)
{
    if (!a->phases.present && !b->phases.present) {
        diff_ranges_none(f, false);
        return 0;
    }
    size_t cap = rows_of(a) + rows_of(b), n = 0;
    struct entry *e = malloc((cap ? cap : 1) * sizeof *e);
    struct diff_range *peak = malloc((cap ? cap : 1) * sizeof *peak);
    struct diff_range *live = malloc((cap ? cap : 1) * sizeof *live);
    if (e == NULL || peak == NULL || live == NULL) {
        free(e);
        free(peak);
        free(live);
        return -1;
    }
    const struct snapshot *side[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        for (size_t d = 0; d < side[k]->ndevices; d++)
            add_rows(e, &n, side[k], k, &side[k]->devices[d].by_phase);
        add_rows(e, &n, side[k], k, &side[k]->host.by_phase);
    }
    qsort(e, n, sizeof *e, by_path);
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        struct diff_range p = {NULL, 0, snapshot_display(a->ctx, e[i].path), 0, 0, false,
                               false}, l = p;
        for (const char *path = e[i].path; i < n && strcmp(e[i].path, path) == 0; i++) {
            uint64_t *pk = e[i].side ? &p.now : &p.base, *lv = e[i].side ? &l.now : &l.base;
            *pk += e[i].peak;
            *lv += e[i].live;
            if (e[i].side)
                p.in_b = l.in_b = true;
            else
                p.in_a = l.in_a = true;
        }
        peak[m] = p;
        live[m++] = l;
    }
    diff_ranges_print(f, peak, m, top, false, false);
    diff_ranges_print(f, live, m, top, true, false);
    free(e);
    free(peak);
    free(live);
    return 0;
}
