/* diff.c - `cumemtrace diff BASE NEW`: what changed between two runs, and
 * the CI gate that stops memory regressions in review.
 *
 * Matching: both files are loaded into one snapctx, so a call site is the
 * same site id in both when its name is the same (frames.h: names survive
 * ASLR and rebuilds; only unsymbolised frames fall back to offsets).
 * Call sites at peak sum `at_peak` over all devices of each file, under the
 * chosen grouping; sorted by |change|, largest first, then by name.
 *
 * Gate: docs/cli.md's `diff` section.  The comparison is exact integer
 * arithmetic (percent kept in millionths), so a threshold test at the
 * boundary is not at the mercy of rounding.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "diff.h"
#include "diff_allocator.h"
#include "diff_phases.h"
#include "diff_tensors.h"
#include "frames.h"
#include "gate.h"
#include "hmap.h"
#include "moment.h"
#include "html.h"
#include "out.h"
#include "ranks.h"
#include "report.h"
#include "report_allocator.h"
#include "sites.h"
#include "units.h"


/* ---- sections ---- */

/* Two dumps of one run: which is which, by their reasons and times (both
 * would otherwise read as the same run's end). */
static void print_moments(FILE *f, const struct snapshot *a, const struct snapshot *b)
{
    if (!moment_same_run(a, b))
        return;
    char ma[96], mb[96], ta[OUT_NUM], tb[OUT_NUM], text[512];
    int64_t da = a->process.dump_time_ns, db = b->process.dump_time_ns;
    snprintf(text, sizeof text, "two dumps of one run (pid %" PRId64 "): base %s%s%s%s, new "
             "%s%s%s%s", a->process.pid, moment_of(a, ma, sizeof ma),
             da != SNAP_UNKNOWN_I64 ? " (" : "", da != SNAP_UNKNOWN_I64 ? out_duration(da, ta) : "",
             da != SNAP_UNKNOWN_I64 ? ")" : "", moment_of(b, mb, sizeof mb),
             db != SNAP_UNKNOWN_I64 ? " (" : "", db != SNAP_UNKNOWN_I64 ? out_duration(db, tb) : "",
             db != SNAP_UNKNOWN_I64 ? ")" : "");
    out_wrap(f, "  ", "  ", text);
}

static int64_t ordinal_at(const struct snapshot *s, size_t i)
{
    return i < s->ndevices ? s->devices[i].ordinal : INT64_MAX;
}

/* PyTorch's max_memory_allocated of each device on either side, beside the
 * peak table's reserved figures. */
static void print_tensor_peaks(FILE *f, const struct snapshot *a, const struct snapshot *b)
{
    size_t i = 0, j = 0;
    while (i < a->ndevices || j < b->ndevices) {
        int64_t oa = ordinal_at(a, i), ob = ordinal_at(b, j);
        int64_t ord = oa < ob ? oa : ob;
        const struct snap_device *da = oa == ord ? &a->devices[i++] : NULL;
        const struct snap_device *db = ob == ord ? &b->devices[j++] : NULL;
        uint64_t pa = da ? report_allocator_peak(a, da) : SNAP_UNKNOWN;
        uint64_t pb = db ? report_allocator_peak(b, db) : SNAP_UNKNOWN;
        if (pa == SNAP_UNKNOWN && pb == SNAP_UNKNOWN)
            continue;
        char x[OUT_NUM], y[OUT_NUM], d[OUT_NUM], c[OUT_NUM + 4] = "";
        if (pa != SNAP_UNKNOWN && pb != SNAP_UNKNOWN)
            snprintf(c, sizeof c, " (%s)", out_sbytes(out_delta(pa, pb), d));
        char text[256]; /* wrapped: a decrease's figures pass 80 columns */
        snprintf(text, sizeof text, "device %" PRId64 ": tensors' peak (max_memory_allocated) "
                 "%s -> %s%s", ord, pa != SNAP_UNKNOWN ? out_bytes(pa, x) : "?",
                 pb != SNAP_UNKNOWN ? out_bytes(pb, y) : "?", c);
        out_wrap(f, "  ", "    ", text);
    }
}

/* Prints the peak table and evaluates the gate; returns whether it failed. */
static bool print_peaks(FILE *f, const struct snapshot *a, const struct snapshot *b,
                        const struct gate *g, char *why, size_t whylen)
{
    bool failed = false;
    struct out_table t;
    out_table_init(&t, "lrrrrrr", 2);
    out_table_row(&t, "device", "base", "new", "change", "%", "base at", "new at");
    size_t i = 0, j = 0;
    while (i < a->ndevices || j < b->ndevices) {
        int64_t oa = ordinal_at(a, i), ob = ordinal_at(b, j);
        int64_t ord = oa < ob ? oa : ob;
        const struct snap_device *da = oa == ord ? &a->devices[i++] : NULL;
        const struct snap_device *db = ob == ord ? &b->devices[j++] : NULL;
        uint64_t pa = da ? da->peak_bytes : 0, pb = db ? db->peak_bytes : 0;
        int64_t ch = out_delta(pa, pb);
        char dev[32], x[OUT_NUM], y[OUT_NUM], c[OUT_NUM], p[OUT_NUM], ta[OUT_NUM], tb[OUT_NUM];
        snprintf(dev, sizeof dev, "%" PRId64, ord);
        out_table_row(&t, dev, da ? out_bytes(pa, x) : "-", db ? out_bytes(pb, y) : "-",
                  out_sbytes(ch, c), out_spct(ch, pa, p),
                  da ? out_duration(da->peak_time_ns, ta) : "-",
                  db ? out_duration(db->peak_time_ns, tb) : "-");
        if (g->on && gate_fails(g, pa, pb) && !failed) {
            /* Exact figures: the table's rounded ones can look equal to
             * the threshold. */
            failed = true;
            if (pa > 0)
                snprintf(why, whylen, "device %" PRId64 " peak grew by %" PRIu64
                         " bytes (+%.4f%%), more than %s", ord, pb - pa,
                         100.0 * (double)(pb - pa) / (double)pa, g->text);
            else
                snprintf(why, whylen, "device %" PRId64 " peak grew by %" PRIu64
                         " bytes (new device), more than %s", ord, pb, g->text);
        }
    }
    if (t.nrows > 1) {
        fprintf(f, "%sPeak per device%s\n", out_color(OUT_BOLD), out_color(OUT_RESET));
        out_table_print(&t, f);
        print_tensor_peaks(f, a, b);
    } else {
        out_table_free(&t);
        fprintf(f, "No device saw tracked activity in either run.\n");
    }
    return failed;
}

struct change {
    uint32_t site;
    uint64_t base, now;
    int64_t delta;
    bool in_a, in_b; /* held something in base, in new (else NEW or GONE) */
};

static const struct snapctx *sort_ctx;
static enum site_by sort_by;

static int by_change(const void *x, const void *y)
{
    const struct change *a = x, *b = y;
    uint64_t ma = a->delta < 0 ? (uint64_t)0 - (uint64_t)a->delta : (uint64_t)a->delta;
    uint64_t mb = b->delta < 0 ? (uint64_t)0 - (uint64_t)b->delta : (uint64_t)b->delta;
    if (ma != mb)
        return ma < mb ? 1 : -1;
    int c = strcmp(sort_ctx->sites[sort_by][a->site].label,
                   sort_ctx->sites[sort_by][b->site].label);
    if (c != 0)
        return c;
    return (a->site > b->site) - (a->site < b->site);
}

/* The groups of every device of s (at_peak or live) summed by site. */
static int sum_devices(struct sites_sum *sum, struct snapshot *s, bool live)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (sites_add(sum, s, live ? &s->devices[i].live : &s->devices[i].at_peak) != 0)
            return -1;
    return 0;
}

/* One table of call-site changes between base and new sums. */
int diff_changes_finish(FILE *f, struct out_table *t, size_t n, size_t top, int64_t rest,
                        size_t unchanged)
{
    int rc = 0;
    if (n == 0) {
        out_table_free(t);
        fprintf(f, "  no call site changed\n");
    } else {
        rc = out_table_print(t, f);
    }
    if (n > top) {
        char c[OUT_NUM];
        fprintf(f, "  (%zu more changed call sites, %s in total)\n", n - top,
                out_sbytes(rest, c));
    }
    if (unchanged > 0)
        fprintf(f, "  (%zu call site%s unchanged)\n", unchanged, unchanged == 1 ? "" : "s");
    return rc;
}

/* What a row shows of a site: its name, and under BY_STACK its callers. */
static size_t visible_text(const struct snapctx *ctx, enum site_by by, uint32_t id,
                           char *buf, size_t n)
{
    const struct site *site = frames_site_get(ctx, by, id);
    char via[512] = "";
    if (by == BY_STACK)
        frames_callers(site->snap, site->stack, 3, via, sizeof via);
    int k = snprintf(buf, n, "%s\n%s", site->display, via);
    return k < 0 ? 0 : (size_t)k < n ? (size_t)k : n - 1;
}

/* Sites of either sum, once each, then those that read the same merged:
 * two stacks that differ only below what a row shows (PyTorch's cudaMalloc
 * path against expandable segments' cuMemCreate path under one Python
 * line) are one call site to the reader, not one GONE and one NEW.
 * Returns how many rows, or -1 when out of memory. */
static long merged_changes(const struct snapctx *ctx, enum site_by by,
                           const struct sites_sum *sa, const struct sites_sum *sb,
                           struct change *ch)
{
    struct arena arena;
    struct hmap seen;
    arena_init(&arena);
    hmap_init(&seen, &arena);
    long n = 0;
    for (int pass = 0; pass < 2; pass++) {
        const struct sites_sum *from = pass == 0 ? sa : sb;
        for (size_t i = 0; i < from->ntouched; i++) {
            uint32_t id = from->touched[i];
            if (pass == 1 && (sites_bytes(sa, id) || sites_count(sa, id) ||
                              (id < sa->cap && sa->kinds[id])))
                continue;
            char key[4096];
            size_t len = visible_text(ctx, by, id, key, sizeof key);
            uint32_t row;
            if (hmap_get_or_add(&seen, key, len, (uint32_t)n, &row, NULL) != 0) {
                n = -1;
                goto out;
            }
            if (row == (uint32_t)n) {
                ch[n] = (struct change){id, 0, 0, 0, false, false};
                n++;
            }
            ch[row].base += sites_bytes(sa, id);
            ch[row].now += sites_bytes(sb, id);
            ch[row].in_a = ch[row].in_a || sites_bytes(sa, id) || sites_count(sa, id);
            ch[row].in_b = ch[row].in_b || sites_bytes(sb, id) || sites_count(sb, id);
        }
    }
out:
    hmap_free(&seen);
    arena_free(&arena);
    return n;
}

static int print_changes(FILE *f, const struct snapctx *ctx, enum site_by by,
                         const struct sites_sum *sa, const struct sites_sum *sb,
                         unsigned top)
{
    size_t cap = sa->ntouched + sb->ntouched + 1;
    struct change *ch = malloc(cap * sizeof *ch);
    long rows = ch != NULL ? merged_changes(ctx, by, sa, sb, ch) : -1;
    if (rows < 0) {
        free(ch);
        return -1;
    }
    size_t n = 0, unchanged = 0;
    for (size_t i = 0; i < (size_t)rows; i++) {
        if (ch[i].base == ch[i].now) {
            unchanged++;
            continue;
        }
        ch[i].delta = out_delta(ch[i].base, ch[i].now);
        ch[n++] = ch[i];
    }
    sort_ctx = ctx;
    sort_by = by;
    if (n > 1)
        qsort(ch, n, sizeof *ch, by_change);

    struct out_table t;
    out_table_init(&t, "rrrll", 2);
    out_table_row(&t, "base", "new", "change", "", "call site");
    int64_t rest = 0;
    for (size_t i = 0; i < n; i++) {
        const struct site *site = frames_site_get(ctx, by, ch[i].site);
        if (i >= top) {
            rest += ch[i].delta;
            continue;
        }
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM], via[512];
        out_table_row(&t, out_bytes(ch[i].base, x), out_bytes(ch[i].now, y),
                  out_sbytes(ch[i].delta, c), !ch[i].in_a ? "NEW" : !ch[i].in_b ? "GONE" : "",
                  site->display);
        if (by == BY_STACK) {
            frames_callers(site->snap, site->stack, 3, via, sizeof via);
            if (via[0])
                out_table_note(&t, via);
        }
    }
    int rc = diff_changes_finish(f, &t, n, top, rest, unchanged);
    free(ch);
    return rc;
}

/* A caching allocator (PyTorch's spoke on either side): the driver-level
 * rows are its cached segments, named by the line that created each. */
static bool caching(const struct snapshot *s)
{
    if (s->oom.present && s->oom.allocator.present)
        return true;
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].allocator.present)
            return true;
    return false;
}

static int print_sites_section(FILE *f, struct snapshot *a, struct snapshot *b,
                               enum site_by by, bool live, unsigned top)
{
    bool segs = caching(a) || caching(b);
    struct sites_sum sa, sb;
    sites_init(&sa, by);
    sites_init(&sb, by);
    int rc = -1;
    if (sum_devices(&sa, a, live) == 0 && sum_devices(&sb, b, live) == 0) {
        char x[OUT_NUM], y[OUT_NUM];
        static const char *const by_name[] = {"stack", "function", "module"};
        fputc('\n', f);
        char head[256];
        if (live && segs)
            snprintf(head, sizeof head, "Live cached segments, by the line that created them: "
                     "%s -> %s", out_bytes(sa.total_bytes, x), out_bytes(sb.total_bytes, y));
        else if (live)
            snprintf(head, sizeof head, "Live when the snapshots were taken (at exit: leaks): "
                     "%s -> %s", out_bytes(sa.total_bytes, x), out_bytes(sb.total_bytes, y));
        else if (segs)
            snprintf(head, sizeof head, "Cached segments at peak, by the line that created "
                     "them%s%s%s, largest change first", by == BY_STACK ? "" : " (by ",
                     by == BY_STACK ? "" : by_name[by], by == BY_STACK ? "" : ")");
        else
            snprintf(head, sizeof head, "Call sites at peak, by %s, largest change first",
                     by_name[by]);
        if (segs) { /* long enough to wrap; the others stay one line */
            fputs(out_color(OUT_BOLD), f);
            out_wrap(f, "", "  ", head);
            fputs(out_color(OUT_RESET), f);
        } else {
            fprintf(f, "%s%s%s\n", out_color(OUT_BOLD), head, out_color(OUT_RESET));
        }
        rc = print_changes(f, a->ctx, by, &sa, &sb, top);
    }
    sites_free(&sa);
    sites_free(&sb);
    return rc;
}

static void print_ooms(FILE *f, const struct snapshot *a, const struct snapshot *b)
{
    char x[OUT_NUM], y[OUT_NUM];
    fputc('\n', f);
    fprintf(f, "%sOOMs%s\n", out_color(OUT_BOLD), out_color(OUT_RESET));
    fprintf(f, "  count %" PRIu64 " -> %" PRIu64 ", failed attempts %" PRIu64 " -> %" PRIu64
               ", recovered %" PRIu64 " -> %" PRIu64 "\n",
            a->ooms.count, b->ooms.count, a->ooms.failed_attempts, b->ooms.failed_attempts,
            a->ooms.recovered, b->ooms.recovered);
    if (a->ooms.retry_released_bytes || b->ooms.retry_released_bytes)
        fprintf(f, "  released by retries %s -> %s\n",
                out_bytes(a->ooms.retry_released_bytes, x),
                out_bytes(b->ooms.retry_released_bytes, y));
}

static struct gate_ooms oom_figures(const struct snapshot *s)
{
    uint64_t rec = s->ooms.recovered < s->ooms.count ? s->ooms.recovered : s->ooms.count;
    return (struct gate_ooms){s->ooms.count, s->ooms.count - rec};
}

/* Per kind: peaks summed over devices (each device's own peak moment),
 * and allocation counts. */
static void kind_totals(const struct snapshot *s, int kind, uint64_t *peak, uint64_t *allocs)
{
    *peak = *allocs = 0;
    if (FORMAT_KIND_ON_HOST(kind)) {
        *peak = s->host.stats.peak_bytes;
        *allocs = s->host.stats.allocs;
        return;
    }
    for (size_t i = 0; i < s->ndevices; i++) {
        *peak += s->devices[i].by_kind[kind].peak_bytes;
        *allocs += s->devices[i].by_kind[kind].allocs;
    }
}

static void print_kinds(FILE *f, const struct snapshot *a, const struct snapshot *b)
{
    struct out_table t;
    out_table_init(&t, "lrrrrr", 2);
    out_table_row(&t, "kind", "base peak", "new peak", "change", "base allocs", "new allocs");
    for (int k = 0; k < KIND_OTHER; k++) { /* every kind format.h names, in its order */
        uint64_t pa, aa, pb, ab;
        kind_totals(a, k, &pa, &aa);
        kind_totals(b, k, &pb, &ab);
        if (pa == 0 && pb == 0 && aa == 0 && ab == 0)
            continue;
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM], n1[32], n2[32];
        snprintf(n1, sizeof n1, "%" PRIu64, aa);
        snprintf(n2, sizeof n2, "%" PRIu64, ab);
        out_table_row(&t, snapshot_kind_name(k), out_bytes(pa, x), out_bytes(pb, y),
                  out_sbytes(out_delta(pa, pb), c), n1, n2);
    }
    fputc('\n', f);
    fprintf(f, "%sPer kind (peaks summed over devices)%s\n", out_color(OUT_BOLD),
            out_color(OUT_RESET));
    if (t.nrows > 1) {
        out_table_print(&t, f);
    } else {
        out_table_free(&t);
        fprintf(f, "  no allocations in either run\n");
    }
}

int diff_text(FILE *f, struct snapshot *a, struct snapshot *b, enum site_by by,
              bool by_range, unsigned top, const struct gate *g)
{
    char why[256] = "";
    char title[2048];
    snprintf(title, sizeof title, "cumemtrace diff: %s -> %s",
             snapshot_display(a->ctx, a->file), snapshot_display(b->ctx, b->file));
    fputs(out_color(OUT_BOLD), f);
    out_wrap(f, "", "  ", title);
    fputs(out_color(OUT_RESET), f);
    print_moments(f, a, b);
    fputc('\n', f);
    bool failed = print_peaks(f, a, b, g, why, sizeof why);
    if (by_range) {
        if (diff_phases(f, a, b, top) != 0)
            return -1;
    } else if (diff_tensors_model(a, b)) { /* none under --segments */
        /* PyTorch's tensors by line, in place of the segments' lines */
        if (diff_tensors_model_print(f, a, b, top) != 0)
            return -1;
    } else if (diff_tensors_print(f, a->ctx, a, b, top) != 0 ||
               print_sites_section(f, a, b, by, false, top) != 0 ||
               print_sites_section(f, a, b, by, true, top) != 0) {
        return -1;
    }
    print_ooms(f, a, b);
    diff_allocator_print(f, a->ctx, a, b);
    print_kinds(f, a, b);
    char oom_why[256];
    bool oom_failed = gate_ooms_fail(g, oom_figures(a), oom_figures(b), oom_why,
                                     sizeof oom_why);
    if (g->on) {
        fputc('\n', f);
        if (failed)
            fprintf(f, "%sgate FAILED: %s%s\n", out_color(OUT_RED), why, out_color(OUT_RESET));
        if (oom_failed)
            fprintf(f, "%sgate FAILED: %s%s\n", out_color(OUT_RED), oom_why,
                    out_color(OUT_RESET));
        if (!failed && !oom_failed)
            fprintf(f, "%sgate passed: no device's peak grew more than %s%s%s\n",
                    out_color(OUT_GREEN), g->text,
                    g->allow_ooms ? "" : ", and no more OOMs than in BASE", out_color(OUT_RESET));
    }
    return failed || oom_failed ? 1 : 0;
}
