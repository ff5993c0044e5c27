/* diff_tensors.c - `cumemtrace diff`'s live tensors: what grew, by the
 * Python line of PyTorch's live tensors (its allocation history,
 * top_tensors), beside the driver-level tables, which for a caching
 * allocator name the line that created each cached segment.
 *
 * Each side's tensors are those of its failure (oom.allocator) when the file
 * is a post-mortem, else those of its devices at the dump, summed.  Lines
 * match across the two files by their text (file:line:function and the
 * callers, the same in two runs of one script).
 * Limitation: a snapshot lists its largest TENSOR_SITES_WRITTEN lines only;
 * a line missing from a full list may sit below it, so its figure there is
 * unknown ("-"), not 0.
 */
#include "diff_tensors.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "moment.h"
#include "out.h"

#define TENSOR_SITES_WRITTEN 5 /* docs/snapshot-format.md: top_tensors, at most 5 */

struct side {
    const struct snap_tensor_site *site[SNAP_TOP_TENSORS * 16];
    size_t n;
    bool present, full;  /* history on; some list was cut at its top 5 */
    char when[96]; /* moment.h: "at its OOM", "at exit", "at its api dump" */
};

static void add_allocator(struct side *sd, const struct snap_allocator *a)
{
    if (!a->present || !a->has_top)
        return;
    sd->present = true;
    sd->full |= a->ntop >= TENSOR_SITES_WRITTEN;
    for (size_t i = 0; i < a->ntop && sd->n < sizeof sd->site / sizeof *sd->site; i++)
        sd->site[sd->n++] = &a->top[i];
}

static void gather(struct side *sd, const struct snapshot *s)
{
    memset(sd, 0, sizeof *sd);
    if (s->oom.present && s->oom.allocator.present && s->oom.allocator.has_top) {
        moment_of(s, sd->when, sizeof sd->when);
        add_allocator(sd, &s->oom.allocator);
        return;
    }
    moment_of(s, sd->when, sizeof sd->when);
    for (size_t i = 0; i < s->ndevices; i++)
        add_allocator(sd, &s->devices[i].allocator);
}

static const char *where_of(const struct snap_tensor_site *t)
{
    return t->where && t->where[0] ? t->where : "";
}

struct row {
    const char *where;
    uint64_t base, now, nbase, nnow;
    bool in_base, in_now;
    int64_t delta;
};

/* Sums side sd's sites into rows (matched by text). */
static void fold(struct row *rows, size_t *n, const struct side *sd, bool is_base)
{
    for (size_t i = 0; i < sd->n; i++) {
        const char *w = where_of(sd->site[i]);
        size_t k = 0;
        while (k < *n && strcmp(rows[k].where, w) != 0)
            k++;
        if (k == *n) {
            memset(&rows[k], 0, sizeof rows[k]);
            rows[k].where = w;
            (*n)++;
        }
        if (is_base) {
            rows[k].base += sd->site[i]->bytes;
            rows[k].nbase += sd->site[i]->count;
            rows[k].in_base = true;
        } else {
            rows[k].now += sd->site[i]->bytes;
            rows[k].nnow += sd->site[i]->count;
            rows[k].in_now = true;
        }
    }
}

static int by_change(const void *x, const void *y)
{
    const struct row *a = x, *b = y;
    uint64_t da = a->delta < 0 ? (uint64_t)-a->delta : (uint64_t)a->delta;
    uint64_t db = b->delta < 0 ? (uint64_t)-b->delta : (uint64_t)b->delta;
    if (da != db)
        return da > db ? -1 : 1;
    return strcmp(a->where, b->where);
}

bool diff_tensors_present(const struct snapshot *a, const struct snapshot *b)
{
    struct side x, y;
    gather(&x, a);
    gather(&y, b);
    return x.present || y.present;
}

int diff_tensors_print(FILE *f, struct snapctx *ctx, const struct snapshot *a,
                       const struct snapshot *b, unsigned top)
{
    struct side *sa = malloc(sizeof *sa), *sb = malloc(sizeof *sb);
    struct row *rows = sa && sb ? malloc((sizeof sa->site / sizeof *sa->site) * 2 * sizeof *rows)
                                : NULL;
    if (rows == NULL) {
        free(sa);
        free(sb);
        return -1;
    }
    gather(sa, a);
    gather(sb, b);
    if (!sa->present && !sb->present) {
        free(rows);
        free(sa);
        free(sb);
        return 0;
    }
    size_t n = 0;
    fold(rows, &n, sa, true);
    fold(rows, &n, sb, false);
    for (size_t i = 0; i < n; i++)
        rows[i].delta = out_delta(rows[i].base, rows[i].now);
    qsort(rows, n, sizeof *rows, by_change);

    char head[256];
    snprintf(head, sizeof head, "Live tensors by Python line (PyTorch's history; base %s, "
             "new %s)", sa->present ? sa->when : "off", sb->present ? sb->when : "off");
    fputc('\n', f);
    fputs(out_color(OUT_BOLD), f);
    out_wrap(f, "", "  ", head);
    fputs(out_color(OUT_RESET), f);
    struct out_table t;
    out_table_init(&t, "rrrrl", 2);
    out_table_row(&t, "base", "new", "change", "tensors", "Python line");
    size_t shown = 0, unknown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        const struct row *r = &rows[i];
        /* Off on a side, or below the top of a full list there: unknown. */
        bool ka = sa->present && (r->in_base || !sa->full);
        bool kb = sb->present && (r->in_now || !sb->full);
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM], cnt[64], fit[1024];
        char na[24] = "-", nb[24] = "-";
        if (ka)
            snprintf(na, sizeof na, "%" PRIu64, r->nbase);
        if (kb)
            snprintf(nb, sizeof nb, "%" PRIu64, r->nnow);
        snprintf(cnt, sizeof cnt, "%s -> %s", na, nb);
        unknown += !ka || !kb;
        const char *w = r->where[0] ? snapshot_display(ctx, r->where)
                                    : "no Python stack (autograd's backward thread)";
        const char *lt = strstr(w, " < ");
        char first[512];
        snprintf(first, sizeof first, "%.*s", lt ? (int)(lt - w) : (int)strlen(w), w);
        out_table_row(&t, ka ? out_bytes(r->base, x) : "-", kb ? out_bytes(r->now, y) : "-",
                      ka && kb ? out_sbytes(r->delta, c) : "", cnt, first);
        if (lt)
            out_table_note(&t, out_fit_chain(lt + 1, OUT_WIDTH > 40 ? OUT_WIDTH - 40 : 40, fit,
                                            sizeof fit));
        shown++;
    }
    int rc = out_table_print(&t, f);
    if (n > shown)
        fprintf(f, "  (%zu more lines)\n", n - shown);
    if (unknown > 0)
        out_wrap(f, "  ", "  ", "-: not known on that side (its history was off, or the "
                 "line was below the largest 5 it lists)");
    free(rows);
    free(sa);
    free(sb);
    return rc;
}
