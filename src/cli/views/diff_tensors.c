/* diff_tensors.c - `cumemtrace diff`'s tensors: what grew, by the line of
 * PyTorch's live tensors.  Files with the tensor model (holders.h) get its
 * tables - the peak's tensors, the live ones, the growth - in place of the
 * driver-level tables (which for a caching allocator name the line that
 * created each cached segment; diff --segments keeps them); files without
 * it (--segments) get PyTorch's top_tensors in the table below them.
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

#include "holders.h"
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
    moment_of(s, sd->when, sizeof sd->when);
    if (s->oom.present && s->oom.allocator.present && s->oom.allocator.has_top) {
        add_allocator(sd, &s->oom.allocator);
        return;
    }
    for (size_t i = 0; i < s->ndevices; i++)
        add_allocator(sd, &s->devices[i].allocator);
}

static const char *where_of(const struct snap_tensor_site *t)
{
    return t->where && t->where[0] ? t->where : "";
}

/* A table's rows: base and new by line, matched across the two files by the
 * line's name.  The tensor model's tables (holders.h) name it
 * "file:line:function" (frames of one snapctx are interned, and so are
 * autograd's "[backward of ...]" names); a file lists every group (only past
 * thousands is a tail folded, "[N more lines]"), so a line absent from one
 * side held nothing there. */

struct trow {
    const char *name, *display;
    const uint32_t *frames; /* a stack of the line, innermost first */
    uint32_t nframes, label;
    const struct snapshot *snap; /* the side that gave frames */
    uint64_t base, now, nbase, nnow;
    bool in_base, in_now;
    int64_t delta;
};

struct ttable {
    struct trow *v;
    size_t n, cap;
};

/* Adds h's bytes and count to its side of the row named h->name. */
static int trow_add(struct ttable *t, const struct snapshot *s, const struct holder *h, bool base)
{
    size_t k = 0;
    while (k < t->n && strcmp(t->v[k].name, h->name) != 0)
        k++;
    if (k == t->n) {
        if (snapshot_vec_reserve((void **)&t->v, &t->cap, sizeof *t->v, t->n + 1))
            return -1;
        memset(&t->v[k], 0, sizeof t->v[k]);
        t->v[k].name = h->name;
        t->v[k].display = h->display;
        t->v[k].label = SNAP_NO_FRAME;
        t->v[k].snap = s;
        t->n++;
    }
    struct trow *r = &t->v[k];
    if (r->frames == NULL) {
        r->frames = h->frames;
        r->nframes = h->nframes;
        r->label = h->label;
    }
    if (base) {
        r->base += h->bytes;
        r->nbase += h->count;
        r->in_base = true;
    } else {
        r->now += h->bytes;
        r->nnow += h->count;
        r->in_now = true;
    }
    return 0;
}

static int by_tchange(const void *x, const void *y)
{
    const struct trow *a = x, *b = y;
    uint64_t da = a->delta < 0 ? (uint64_t)-a->delta : (uint64_t)a->delta;
    uint64_t db = b->delta < 0 ? (uint64_t)-b->delta : (uint64_t)b->delta;
    if (da != db)
        return da > db ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Each row's change, then the rows largest change first. */
static void ttable_sort(struct ttable *t)
{
    for (size_t i = 0; i < t->n; i++)
        t->v[i].delta = out_delta(t->v[i].base, t->v[i].now);
    if (t->n > 1)
        qsort(t->v, t->n, sizeof *t->v, by_tchange);
}

int diff_tensors_print(FILE *f, struct snapctx *ctx, const struct snapshot *a,
                       const struct snapshot *b, unsigned top)
{
    struct side *sa = malloc(sizeof *sa), *sb = malloc(sizeof *sb);
    struct ttable rows = {NULL, 0, 0};
    int rc = -1;
    if (sa == NULL || sb == NULL)
        goto out;
    gather(sa, a);
    gather(sb, b);
    rc = 0;
    if (!sa->present && !sb->present)
        goto out;
    for (int k = 0; k < 2 && rc == 0; k++) {
        const struct side *sd = k == 0 ? sa : sb;
        for (size_t i = 0; i < sd->n && rc == 0; i++) {
            const char *w = where_of(sd->site[i]);
            struct holder h = {.label = SNAP_NO_FRAME, .name = w, .display = w,
                               .bytes = sd->site[i]->bytes, .count = sd->site[i]->count};
            rc = trow_add(&rows, NULL, &h, k == 0);
        }
    }
    if (rc != 0)
        goto out;
    ttable_sort(&rows);
    size_t n = rows.n;

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
        const struct trow *r = &rows.v[i];
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
        const char *w = r->name[0] ? snapshot_display(ctx, r->name)
                                    : "no Python stack (allocated off the Python thread, "
                                      "e.g. by autograd's backward)";
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
    rc = out_table_print(&t, f);
    if (n > shown)
        fprintf(f, "  (%zu more lines)\n", n - shown);
    if (unknown > 0)
        out_wrap(f, "  ", "  ", "-: not known on that side (its history was off, or the "
                 "line was below the largest 5 it lists)");
out:
    free(rows.v);
    free(sa);
    free(sb);
    return rc;
}

struct tside {
    bool present;
    uint64_t total, cache;
    bool has_cache;
    char when[96];
};

static int tside_add(struct ttable *t, struct tside *sd, struct snapshot *s,
                     const struct snap_device *d, enum holders_moment m, bool base)
{
    if (!holders_have_tensors(s, d, m))
        return 0;
    struct holders h;
    if (holders_get(s, d, m, false, &h) != 0)
        return -1;
    int rc = 0;
    sd->present = true;
    sd->total += h.total_bytes;
    if (h.has_cache && h.cache_bytes != SNAP_UNKNOWN) {
        sd->has_cache = true;
        sd->cache += h.cache_bytes;
    }
    for (size_t i = 0; rc == 0 && i < h.n; i++)
        rc = trow_add(t, s, &h.v[i], base);
    if (rc == 0 && h.has_more) {
        struct holder more = {.label = SNAP_NO_FRAME, .name = "[more lines]",
                              .display = "[more lines, folded by the writer]",
                              .bytes = h.more_bytes, .count = h.more_count};
        rc = trow_add(t, s, &more, base);
    }
    holders_free(&h);
    return rc;
}

/* A side's tensors at moment m: the failure's for HOLDERS_OOM, else every
 * device's, summed. */
static int tside_gather(struct ttable *t, struct tside *sd, struct snapshot *s,
                        enum holders_moment m, bool base)
{
    memset(sd, 0, sizeof *sd);
    moment_of(s, sd->when, sizeof sd->when);
    if (m == HOLDERS_OOM)
        return tside_add(t, sd, s, NULL, m, base);
    for (size_t i = 0; i < s->ndevices; i++)
        if (tside_add(t, sd, s, &s->devices[i], m, base) != 0)
            return -1;
    return 0;
}

static bool has_tensors(const struct snapshot *s)
{
    if (holders_have_tensors(s, NULL, HOLDERS_OOM))
        return true;
    for (size_t i = 0; i < s->ndevices; i++)
        if (holders_have_tensors(s, &s->devices[i], HOLDERS_NOW) ||
            holders_have_tensors(s, &s->devices[i], HOLDERS_PEAK))
            return true;
    return false;
}

bool diff_tensors_model(const struct snapshot *a, const struct snapshot *b)
{
    return has_tensors(a) || has_tensors(b);
}

static int ttable_print(FILE *f, struct snapctx *ctx, const char *head, struct ttable *t,
                        const struct tside *sa, const struct tside *sb, unsigned top)
{
    ttable_sort(t);
    fputc('\n', f);
    fputs(out_color(OUT_BOLD), f);
    out_wrap(f, "", "  ", head);
    fputs(out_color(OUT_RESET), f);
    struct out_table tb;
    out_table_init(&tb, "rrrrl", 2);
    out_table_row(&tb, "base", "new", "change", "tensors", "line");
    size_t shown = 0, unchanged = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct trow *r = &t->v[i];
        if (r->delta == 0 && r->nbase == r->nnow) {
            unchanged++;
            continue;
        }
        if (shown >= top)
            continue;
        /* Off on a side: its tensors were not read there. */
        bool ka = sa->present, kb = sb->present;
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM], cnt[64], line[1024], via[512], fit[1024];
        snprintf(cnt, sizeof cnt, "%" PRIu64 " -> %" PRIu64, r->nbase, r->nnow);
        snprintf(line, sizeof line, "%s%s", snapshot_display(ctx, r->display),
                 !r->in_base && ka ? " (new)" : !r->in_now && kb ? " (gone)" : "");
        out_table_row(&tb, ka ? out_bytes(r->base, x) : "-", kb ? out_bytes(r->now, y) : "-",
                      ka && kb ? out_sbytes(r->delta, c) : "", cnt, line);
        /* "< caller < caller": up to two frames outward of the row's line */
        struct holder hd = {.frames = r->frames, .nframes = r->nframes, .label = r->label};
        if (r->label != SNAP_NO_FRAME &&
            holders_callers(r->snap, &hd, 2, false, via, sizeof via)[0])
            out_table_note(&tb, out_fit_chain(via, OUT_WIDTH > 40 ? OUT_WIDTH - 40 : 40, fit,
                                              sizeof fit));
        shown++;
    }
    if (sa->has_cache || sb->has_cache) {
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM];
        out_table_row(&tb, sa->has_cache ? out_bytes(sa->cache, x) : "-",
                      sb->has_cache ? out_bytes(sb->cache, y) : "-",
                      sa->has_cache && sb->has_cache ? out_sbytes(out_delta(sa->cache, sb->cache), c)
                                                     : "",
                      "", "PyTorch's cache");
    }
    int rc = out_table_print(&tb, f);
    size_t changed = t->n - unchanged;
    if (changed > shown)
        fprintf(f, "  (%zu more lines changed; --top N shows more)\n", changed - shown);
    if (unchanged > 0)
        fprintf(f, "  (%zu line%s unchanged)\n", unchanged, unchanged == 1 ? "" : "s");
    return rc;
}

/* The device's step count at the dump (PyTorch's layer: optimizer steps
 * done), SNAP_UNKNOWN_I64 when no device says. */
static int64_t steps_of(const struct snapshot *s)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].allocator.present && s->devices[i].allocator.step != SNAP_UNKNOWN_I64)
            return s->devices[i].allocator.step;
    return SNAP_UNKNOWN_I64;
}

/* Two dumps of one run: the lines whose tensors grew from one to the
 * other, with the rate a step where both dumps know their step. */
static void print_growth_between(FILE *f, struct snapctx *ctx, const struct snapshot *a,
                                 const struct snapshot *b, struct ttable *t, unsigned top)
{
    int64_t sa = steps_of(a), sb = steps_of(b);
    bool steps = sa != SNAP_UNKNOWN_I64 && sb != SNAP_UNKNOWN_I64 && sb > sa;
    size_t shown = 0;
    for (size_t i = 0; i < t->n && shown < top; i++) {
        const struct trow *r = &t->v[i];
        if (r->delta <= 0)
            continue;
        if (shown++ == 0) {
            char head[160];
            if (steps)
                snprintf(head, sizeof head, "Growth by line between the two dumps (steps %"
                         PRId64 " -> %" PRId64 ")", sa, sb);
            else
                snprintf(head, sizeof head, "Growth by line between the two dumps");
            fputc('\n', f);
            fprintf(f, "%s%s%s\n", out_color(OUT_BOLD), head, out_color(OUT_RESET));
        }
        char d[OUT_NUM], now[OUT_NUM], text[1024];
        if (steps)
            snprintf(text, sizeof text, "%s a step at %s, steps %" PRId64 "-%" PRId64
                     ", %s now", out_sbytes(r->delta / (sb - sa), d),
                     snapshot_display(ctx, r->display), sa, sb, out_bytes(r->now, now));
        else
            snprintf(text, sizeof text, "%s at %s, %s now", out_sbytes(r->delta, d),
                     snapshot_display(ctx, r->display), out_bytes(r->now, now));
        out_wrap(f, "  ", "    ", text);
    }
}

/* NEW's own growth statements (its `growth`: step over step through the
 * run), one sentence a line. */
static int print_growth_of(FILE *f, struct snapshot *s, unsigned top)
{
    bool head = false;
    for (size_t i = 0; i < s->ndevices; i++) {
        struct holders h;
        if (holders_growth(s, &s->devices[i], &h) != 0)
            return -1;
        for (size_t k = 0; k < h.n && k < top; k++) {
            const struct snap_tgroup *g = h.v[k].group;
            if (!head) {
                fputc('\n', f);
                fprintf(f, "%sGrowth by line in NEW, step over step%s\n", out_color(OUT_BOLD),
                        out_color(OUT_RESET));
                head = true;
            }
            char r[OUT_NUM], now[OUT_NUM], text[1024], steps[96] = "";
            if (g->first_step != SNAP_UNKNOWN_I64 && g->last_step != SNAP_UNKNOWN_I64)
                snprintf(steps, sizeof steps, ", steps %" PRId64 "-%" PRId64, g->first_step,
                         g->last_step);
            snprintf(text, sizeof text, "+%s a step at %s%s, %s now",
                     out_bytes(g->bytes_per_step, r), snapshot_display(s->ctx, h.v[k].display),
                     steps, out_bytes(h.v[k].bytes, now));
            out_wrap(f, "  ", "    ", text);
        }
        holders_free(&h);
    }
    return 0;
}

static enum holders_moment live_moment(const struct snapshot *s)
{
    return holders_have_tensors(s, NULL, HOLDERS_OOM) ? HOLDERS_OOM : HOLDERS_NOW;
}

int diff_tensors_model_print(FILE *f, struct snapshot *a, struct snapshot *b, unsigned top)
{
    struct ttable t = {NULL, 0, 0};
    struct tside sa, sb;
    char head[512], x[OUT_NUM], y[OUT_NUM];
    int rc = 0;
    /* the peak's tensors (max_memory_allocated) */
    if (tside_gather(&t, &sa, a, HOLDERS_PEAK, true) != 0 ||
        tside_gather(&t, &sb, b, HOLDERS_PEAK, false) != 0) {
        rc = -1;
        goto out;
    }
    if (sa.present || sb.present) {
        snprintf(head, sizeof head, "The peak's tensors by line (max_memory_allocated %s -> "
                 "%s), largest change first", sa.present ? out_bytes(sa.total, x) : "?",
                 sb.present ? out_bytes(sb.total, y) : "?");
        if (ttable_print(f, a->ctx, head, &t, &sa, &sb, top) != 0) {
            rc = -1;
            goto out;
        }
    }
    bool peak_read = sa.present || sb.present;
    t.n = 0;
    /* live: at the failure of a post-mortem, else at the dump */
    if (tside_gather(&t, &sa, a, live_moment(a), true) != 0 ||
        tside_gather(&t, &sb, b, live_moment(b), false) != 0) {
        rc = -1;
        goto out;
    }
    if (sa.present || sb.present) {
        snprintf(head, sizeof head, "Live tensors by line (base %s: %s, new %s: %s)", sa.when,
                 sa.present ? out_bytes(sa.total, x) : "not read", sb.when,
                 sb.present ? out_bytes(sb.total, y) : "not read");
        if (ttable_print(f, a->ctx, head, &t, &sa, &sb, top) != 0) {
            rc = -1;
            goto out;
        }
        if (!peak_read)
            out_wrap(f, "  ", "  ", "(neither file has the peak's tensors: PyTorch's layer "
                     "reads them by default; not under CUMEMTRACE_TORCH_PEAK=0, nor when "
                     "its trace did not reach the peak exactly)");
        if (moment_same_run(a, b) && sa.present && sb.present)
            print_growth_between(f, a->ctx, a, b, &t, top);
    }
    if (!moment_same_run(a, b))
        rc = print_growth_of(f, b, top);
out:
    free(t.v);
    return rc;
}
