/* diff_phases.c - `cumemtrace diff --by range`: what each of the program's
 * ranges (NVTX, PyTorch's phases) held at the peak in two runs.  Ranges
 * match by path ("validation/step 1200"), which survives a rebuild; the
 * figures are the snapshots' by_phase rows, exact at each device's peak,
 * summed over devices as the call-site diff sums them. */
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

struct change {
    const char *path;
    uint64_t base, now;
    int64_t delta;
    bool in_a, in_b;
};

static int by_path(const void *x, const void *y)
{
    const struct entry *a = x, *b = y;
    int c = strcmp(a->path, b->path);
    return c ? c : a->side - b->side;
}

static int by_change(const void *x, const void *y)
{
    const struct change *a = x, *b = y;
    uint64_t da = a->delta < 0 ? (uint64_t)-a->delta : (uint64_t)a->delta;
    uint64_t db = b->delta < 0 ? (uint64_t)-b->delta : (uint64_t)b->delta;
    if (da != db)
        return da > db ? -1 : 1;
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

static void table(FILE *f, struct snapshot *a, const struct change *ch, size_t n, unsigned top,
                  bool live)
{
    fputc('\n', f);
    fprintf(f, "%s%s%s\n", out_color(OUT_BOLD),
            live ? "Live by range when the snapshots were taken (at exit: leaks)"
                 : "Ranges at peak, largest change first",
            out_color(OUT_RESET));
    size_t changed = 0, unchanged = 0;
    int64_t rest = 0;
    struct out_table t;
    out_table_init(&t, "rrrll", 2);
    out_table_row(&t, "base", "new", "change", "", "range");
    for (size_t i = 0; i < n; i++) {
        if (ch[i].delta == 0 && ch[i].in_a && ch[i].in_b) {
            unchanged++;
            continue;
        }
        if (changed++ >= top) {
            rest += ch[i].delta;
            continue;
        }
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM];
        out_table_row(&t, out_bytes(ch[i].base, x), out_bytes(ch[i].now, y),
                      out_sbytes(ch[i].delta, c), !ch[i].in_a ? "NEW" : !ch[i].in_b ? "GONE" : "",
                      snapshot_display(a->ctx, ch[i].path));
    }
    if (changed == 0) {
        out_table_free(&t);
        fprintf(f, "  no range changed\n");
    } else {
        out_table_print(&t, f);
    }
    if (changed > top) {
        char c[OUT_NUM];
        fprintf(f, "  (%zu more changed ranges, %s in total)\n", changed - top,
                out_sbytes(rest, c));
    }
    if (unchanged > 0)
        fprintf(f, "  (%zu range%s unchanged)\n", unchanged, unchanged == 1 ? "" : "s");
}

int diff_phases(FILE *f, struct snapshot *a, struct snapshot *b, unsigned top)
{
    if (!a->phases.present && !b->phases.present) {
        fprintf(f, "\nNeither run opened a range (NVTX, PyTorch's phases, "
                   "cumemtrace_phase_push): nothing to compare by range\n");
        return 0;
    }
    size_t cap = rows_of(a) + rows_of(b), n = 0;
    struct entry *e = malloc((cap ? cap : 1) * sizeof *e);
    struct change *peak = malloc((cap ? cap : 1) * sizeof *peak);
    struct change *live = malloc((cap ? cap : 1) * sizeof *live);
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
        struct change p = {e[i].path, 0, 0, 0, false, false}, l = p;
        for (; i < n && strcmp(e[i].path, p.path) == 0; i++) {
            uint64_t *pk = e[i].side ? &p.now : &p.base, *lv = e[i].side ? &l.now : &l.base;
            *pk += e[i].peak;
            *lv += e[i].live;
            if (e[i].side)
                p.in_b = l.in_b = true;
            else
                p.in_a = l.in_a = true;
        }
        p.delta = out_delta(p.base, p.now);
        l.delta = out_delta(l.base, l.now);
        peak[m] = p;
        live[m++] = l;
    }
    qsort(peak, m, sizeof *peak, by_change);
    qsort(live, m, sizeof *live, by_change);
    table(f, a, peak, m, top, false);
    table(f, a, live, m, top, true);
    free(e);
    free(peak);
    free(live);
    return 0;
}
