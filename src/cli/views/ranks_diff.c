/* ranks_diff.c - `cumemtrace diff DIR_A DIR_B`: two runs of a multi-rank
 * job compared rank by rank, and the CI gate on the worst rank; how ranks
 * pair and what each section holds is docs/cli.md's `diff` section.
 * Call sites match across the runs by name (frames_site_text); with
 * --by range, diff_phases.c's table prints a row per rank and range.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "diff_phases.h"
#include "esc.h"
#include "gate.h"
#include "hmap.h"
#include "out.h"
#include "ranks.h"
#include "snapshot.h"

#define LISTED_MAX 8

static bool same_place(const struct rank_row *a, const struct rank_row *b)
{
    return a->rank == SNAP_UNKNOWN_I64 && b->rank == SNAP_UNKNOWN_I64 &&
           a->local_rank != SNAP_UNKNOWN_I64 && a->local_rank == b->local_rank &&
           a->host && b->host && strcmp(a->host, b->host) == 0;
}

/* For each row of a, its partner in b or RANKS_NONE; *taken marks b's. */
static size_t *match(const struct ranks *a, const struct ranks *b, bool *taken)
{
    size_t *m = malloc((a->nrows ? a->nrows : 1) * sizeof *m);
    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < a->nrows; i++) {
        m[i] = RANKS_NONE;
        if (a->rows[i].rank != SNAP_UNKNOWN_I64)
            m[i] = ranks_find(b, a->rows[i].rank);
        for (size_t j = 0; j < b->nrows && m[i] == RANKS_NONE; j++)
            if (!taken[j] && same_place(&a->rows[i], &b->rows[j]))
                m[i] = j;
        if (m[i] != RANKS_NONE)
            taken[m[i]] = true;
    }
    return m;
}

/* A rank of BASE and its partner in NEW; either RANKS_NONE (GONE, NEW). */
struct pair {
    size_t ra, rb;
};

/* The pairs in the order the tables list them: BASE's ranks, then those
 * only NEW has.  *n gets their number; NULL when out of memory. */
static struct pair *pairs(const struct ranks *a, const struct ranks *b, size_t *n)
{
    bool *taken = calloc(b->nrows ? b->nrows : 1, sizeof *taken);
    size_t *m = taken ? match(a, b, taken) : NULL;
    struct pair *v = m ? malloc((a->nrows + b->nrows + 1) * sizeof *v) : NULL;
    *n = 0;
    for (size_t i = 0; v != NULL && i < a->nrows; i++)
        v[(*n)++] = (struct pair){i, m[i]};
    for (size_t i = 0; v != NULL && i < b->nrows; i++)
        if (!taken[i])
            v[(*n)++] = (struct pair){RANKS_NONE, i};
    free(m);
    free(taken);
    return v;
}

static uint64_t peak_of(const struct ranks *r, size_t row)
{
    return row == RANKS_NONE ? 0 : r->files[r->rows[row].chosen].peak;
}

/* How far past the gate a growth is, to find the worst rank: growth in
 * bytes, or growth / base (new ranks, base 0, worst of all). */
static double badness(const struct gate *g, uint64_t base, uint64_t now)
{
    double growth = (double)now - (double)base;
    if (!g->percent)
        return growth;
    return base ? growth / (double)base : 1e300;
}

struct worst {
    bool failed;
    double how;
    char why[256];
};

static void judge(struct worst *w, const struct gate *g, const char *who, uint64_t pa,
                  uint64_t pb)
{
    if (!g->on || !gate_fails(g, pa, pb))
        return;
    double how = badness(g, pa, pb);
    if (w->failed && how <= w->how)
        return;
    w->failed = true;
    w->how = how;
    if (pa > 0)
        snprintf(w->why, sizeof w->why, "%s peak grew by %" PRIu64 " bytes (+%.4f%%), more "
                 "than %s", who, pb - pa, 100.0 * (double)(pb - pa) / (double)pa, g->text);
    else
        snprintf(w->why, sizeof w->why, "%s peak grew by %" PRIu64 " bytes (new rank), "
                 "more than %s", who, pb, g->text);
}

static int print_peaks(FILE *f, const struct ranks *a, const struct ranks *b,
                       const struct pair *p, size_t np, const struct gate *g,
                       struct worst *w)
{
    struct out_table t;
    out_table_init(&t, "lrrrr", 2);
    out_table_row(&t, "rank", "base", "new", "change", "%");
    for (size_t i = 0; i < np; i++) {
        size_t ra = p[i].ra, rb = p[i].rb;
        const struct rank_row *row = ra != RANKS_NONE ? &a->rows[ra] : &b->rows[rb];
        uint64_t pa = peak_of(a, ra), pb = peak_of(b, rb);
        char who[96], x[OUT_NUM], y[OUT_NUM], c[OUT_NUM], pc[OUT_NUM];
        ranks_name(row, who, sizeof who);
        int64_t ch = out_delta(pa, pb);
        out_table_row(&t, who, ra != RANKS_NONE ? out_bytes(pa, x) : "-",
                      rb != RANKS_NONE ? out_bytes(pb, y) : "-", out_sbytes(ch, c),
                      ra == RANKS_NONE ? "NEW" : rb == RANKS_NONE ? "GONE"
                                                                  : out_spct(ch, pa, pc));
        if (rb != RANKS_NONE)
            judge(w, g, who, pa, pb);
    }
    fprintf(f, "%sPeak per rank%s\n", out_color(OUT_BOLD), out_color(OUT_RESET));
    return out_table_print(&t, f);
}

/* The newest file of a rank, or NULL for none. */
static const struct rank_file *chosen(const struct ranks *r, size_t row)
{
    return row == RANKS_NONE ? NULL : &r->files[r->rows[row].chosen];
}

/* Appends to v one row per range of either file (both sorted by path). */
static void pair_rows(struct diff_range *v, size_t *n, const struct rank_file *fa,
                      const struct rank_file *fb, const char *who, size_t order, bool live)
{
    size_t na = fa ? fa->nranges : 0, nb = fb ? fb->nranges : 0, i = 0, j = 0;
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(fa->ranges[i].path, fb->ranges[j].path);
        const struct rank_range *x = c <= 0 ? &fa->ranges[i++] : NULL;
        const struct rank_range *y = c >= 0 ? &fb->ranges[j++] : NULL;
        v[(*n)++] = (struct diff_range){
            who, order, x ? x->path : y->path,
            x ? (live ? x->live : x->at_peak) : 0, y ? (live ? y->live : y->at_peak) : 0,
            x != NULL, y != NULL};
    }
}

/* The two range tables of diff --by range, a row per rank and range: at
 * each rank's peaks, and live at its dump. */
static int print_ranges(FILE *f, const struct ranks *a, const struct ranks *b,
                        const struct pair *p, size_t np, unsigned top)
{
    size_t cap = 1;
    bool any = false;
    for (size_t i = 0; i < np; i++) {
        const struct rank_file *fa = chosen(a, p[i].ra), *fb = chosen(b, p[i].rb);
        cap += (fa ? fa->nranges : 0) + (fb ? fb->nranges : 0);
        any = any || (fa && fa->has_phases) || (fb && fb->has_phases);
    }
    if (!any) {
        diff_ranges_none(f, true);
        return 0;
    }
    struct diff_range *v = malloc(cap * sizeof *v);
    char (*who)[96] = malloc((np ? np : 1) * sizeof *who);
    if (v == NULL || who == NULL) {
        free(v);
        free(who);
        return -1;
    }
    for (int live = 0; live < 2; live++) {
        size_t n = 0;
        for (size_t i = 0; i < np; i++) {
            const struct rank_row *row = p[i].ra != RANKS_NONE ? &a->rows[p[i].ra]
                                                               : &b->rows[p[i].rb];
            ranks_name(row, who[i], sizeof who[i]);
            pair_rows(v, &n, chosen(a, p[i].ra), chosen(b, p[i].rb), who[i], i, live);
        }
        diff_ranges_print(f, v, n, top, live, true);
    }
    free(v);
    free(who);
    return 0;
}

struct change {
    const struct rank_site *site;
    uint64_t base, now;
    uint64_t mag;
    bool in_a, in_b;
};

static int by_change(const void *x, const void *y)
{
    const struct change *a = x, *b = y;
    if (a->mag != b->mag)
        return a->mag < b->mag ? 1 : -1;
    int c = strcmp(a->site->display, b->site->display);
    return c ? c : strcmp(a->site->callers, b->site->callers);
}

/* One row per call site as the reader sees it (name and callers): sites of
 * either job that read the same are merged, so a stack that differs only
 * below the shown frames is not one GONE and one NEW row.  Returns the
 * number of rows in v, or -1 when out of memory. */
static long merged(const struct ranks *a, const struct ranks *b, struct change *v)
{
    struct arena arena;
    struct hmap seen;
    arena_init(&arena);
    hmap_init(&seen, &arena);
    long n = 0;
    for (int pass = 0; pass < 2; pass++) {
        const struct ranks *from = pass == 0 ? a : b, *other = pass == 0 ? b : a;
        for (size_t i = 0; i < from->nsites; i++) {
            const struct rank_site *s = &from->sites[i];
            uint32_t j;
            bool there = hmap_find(&other->site_keys, s->key, s->key_len, &j);
            if (pass == 1 && (there || s->total == 0))
                continue; /* counted with a's, or nothing to show */
            uint64_t base = pass == 0 ? s->total : 0;
            uint64_t now = pass == 0 ? (there ? b->sites[j].total : 0) : s->total;
            char key[4096];
            int k = snprintf(key, sizeof key, "%s\n%s", s->display, s->callers);
            size_t len = k < 0 ? 0 : (size_t)k < sizeof key ? (size_t)k : sizeof key - 1;
            uint32_t row;
            if (hmap_get_or_add(&seen, key, len, (uint32_t)n, &row, NULL) != 0) {
                n = -1;
                goto out;
            }
            if (row == (uint32_t)n)
                v[n++] = (struct change){s, 0, 0, 0, false, false};
            v[row].base += base;
            v[row].now += now;
            v[row].in_a = v[row].in_a || pass == 0;
            v[row].in_b = v[row].in_b || pass == 1 || there;
        }
    }
out:
    hmap_free(&seen);
    arena_free(&arena);
    return n;
}

static int print_sites(FILE *f, const struct ranks *a, const struct ranks *b, unsigned top)
{
    struct change *v = malloc((a->nsites + b->nsites + 1) * sizeof *v);
    long rows = v != NULL ? merged(a, b, v) : -1;
    if (rows < 0) {
        free(v);
        return -1;
    }
    size_t n = 0, unchanged = 0;
    for (size_t i = 0; i < (size_t)rows; i++) {
        if (v[i].now == v[i].base) {
            unchanged++;
            continue;
        }
        v[i].mag = v[i].now > v[i].base ? v[i].now - v[i].base : v[i].base - v[i].now;
        v[n++] = v[i];
    }
    qsort(v, n, sizeof *v, by_change);
    fputc('\n', f);
    fprintf(f, "%sCall sites at the ranks' peaks, summed over ranks, largest change "
               "first%s\n", out_color(OUT_BOLD), out_color(OUT_RESET));
    struct out_table t;
    out_table_init(&t, "rrrll", 2);
    out_table_row(&t, "base", "new", "change", "", "call site");
    int64_t rest = 0;
    for (size_t i = 0; i < n; i++) {
        if (i >= top) {
            rest += out_delta(v[i].base, v[i].now);
            continue;
        }
        char x[OUT_NUM], y[OUT_NUM], c[OUT_NUM];
        out_table_row(&t, out_bytes(v[i].base, x), out_bytes(v[i].now, y),
                      out_sbytes(out_delta(v[i].base, v[i].now), c),
                      !v[i].in_a ? "NEW" : !v[i].in_b ? "GONE" : "", v[i].site->display);
        if (v[i].site->callers[0])
            out_table_note(&t, v[i].site->callers);
    }
    int rc = diff_changes_finish(f, &t, n, top, rest, unchanged);
    free(v);
    return rc;
}

/* The OOMs of a job, summed over its ranks. */
static struct gate_ooms job_ooms(const struct ranks *r, uint64_t *ran_out)
{
    struct gate_ooms o = {0, 0};
    *ran_out = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        o.chains += r->rows[i].ooms;
        o.failed += r->rows[i].failed_ooms;
        *ran_out += r->rows[i].first_oom_ns != SNAP_UNKNOWN_I64;
    }
    return o;
}

static void print_ooms(FILE *f, const struct ranks *a, const struct ranks *b)
{
    uint64_t ra, rb;
    uint64_t ca = job_ooms(a, &ra).chains, cb = job_ooms(b, &rb).chains;
    fputc('\n', f);
    fprintf(f, "%sOOMs%s\n", out_color(OUT_BOLD), out_color(OUT_RESET));
    fprintf(f, "  ranks that ran out of memory %" PRIu64 " -> %" PRIu64 ", OOMs %" PRIu64
               " -> %" PRIu64 "\n", ra, rb, ca, cb);
}

int ranks_diff_main(char *base, char *now, const struct gate *g, unsigned top, bool by_range)
{
    char *args[2] = {base, now};
    struct ranks r[2];
    for (int k = 0; k < 2; k++) {
        char **paths;
        size_t n;
        int rc = ranks_expand(&args[k], 1, &paths, &n);
        if (rc == 0) {
            rc = ranks_merge(&r[k], paths, n, by_range);
            if (rc == 0) /* the driver's call sites, matched by stack */
                ranks_use(&r[k], RANKS_SEGMENTS);
            /* Rows keep paths: they live as long as the merge. */
            if (rc != 0)
                ranks_paths_free(paths, n);
            else
                r[k].owned_paths = paths, r[k].nowned = n;
        }
        if (rc != 0) {
            if (k == 1)
                ranks_free(&r[0]);
            return CLI_EXIT_ERROR;
        }
    }
    char title[4096], *shown[2];
    for (int k = 0; k < 2; k++) {
        shown[k] = malloc(ESC_ROOM(strlen(args[k])));
        if (shown[k] != NULL)
            esc_text(args[k], shown[k]);
    }
    snprintf(title, sizeof title, "cumemtrace diff: %s (%zu rank%s) -> %s (%zu rank%s)",
             shown[0] ? shown[0] : "?", r[0].nrows, r[0].nrows == 1 ? "" : "s",
             shown[1] ? shown[1] : "?", r[1].nrows, r[1].nrows == 1 ? "" : "s");
    free(shown[0]);
    free(shown[1]);
    fputs(out_color(OUT_BOLD), stdout);
    out_wrap(stdout, "", "  ", title);
    fputs(out_color(OUT_RESET), stdout);
    fputc('\n', stdout);
    struct worst w = {false, 0, ""};
    size_t np;
    struct pair *p = pairs(&r[0], &r[1], &np);
    int rc = p != NULL ? print_peaks(stdout, &r[0], &r[1], p, np, g, &w) : -1;
    if (rc == 0)
        rc = by_range ? print_ranges(stdout, &r[0], &r[1], p, np, top)
                      : print_sites(stdout, &r[0], &r[1], top);
    free(p);
    bool oom_failed = false;
    if (rc == 0) {
        print_ooms(stdout, &r[0], &r[1]);
        uint64_t ra, rb;
        char why[256];
        oom_failed = gate_ooms_fail(g, job_ooms(&r[0], &ra), job_ooms(&r[1], &rb), why,
                                    sizeof why);
        if (g->on) {
            fputc('\n', stdout);
            if (w.failed)
                fprintf(stdout, "%sgate FAILED: %s%s\n", out_color(OUT_RED), w.why,
                        out_color(OUT_RESET));
            if (oom_failed)
                fprintf(stdout, "%sgate FAILED: %s%s\n", out_color(OUT_RED), why,
                        out_color(OUT_RESET));
            if (!w.failed && !oom_failed)
                fprintf(stdout, "%sgate passed: no rank's peak grew more than %s%s%s\n",
                        out_color(OUT_GREEN), g->text,
                        g->allow_ooms ? "" : ", and no more OOMs than in BASE",
                        out_color(OUT_RESET));
        }
    }
    for (int k = 0; k < 2; k++) {
        ranks_paths_free(r[k].owned_paths, r[k].nowned);
        ranks_free(&r[k]);
    }
    if (rc != 0) {
        fprintf(stderr, "cumemtrace: diff: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    if (cli_finish_stdout() != 0)
        return CLI_EXIT_ERROR;
    return w.failed || oom_failed ? CLI_EXIT_GATE : CLI_EXIT_OK;
}
