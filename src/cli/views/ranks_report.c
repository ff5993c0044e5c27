/* ranks_report.c - the per-rank view of `cumemtrace report` over many
 * ranks' files (ranks.h): a row per rank, the imbalance, who failed first,
 * the call sites summed over ranks with their per-rank spread. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "out.h"
#include "ranks.h"
#include "report.h"
#include "snapshot.h"

#define STANDOUT_PCT 10 /* a rank stands out beyond this far from the median */
#define LISTED_MAX 8    /* ranks named in one line before "and N more" */

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The table gains a "peak in" column (the range the rank's peak was
 * reached in) when any rank's chosen file has one. */
static void print_table(FILE *f, const struct ranks *r)
{
    bool ranges = false;
    for (size_t i = 0; i < r->nrows; i++)
        ranges |= r->files[r->rows[i].chosen].peak_range != NULL;
    struct out_table t;
    out_table_init(&t, ranges ? "rlrrlrrl" : "rlrrrrl", 2);
    if (ranges)
        out_table_row(&t, "rank", "host:local", "peak", "at", "peak in", "at end", "OOMs",
                      "written");
    else
        out_table_row(&t, "rank", "host:local", "peak", "at", "at end", "OOMs", "written");
    for (size_t i = 0; i < r->nrows; i++) {
        const struct rank_row *row = &r->rows[i];
        const struct rank_file *fl = &r->files[row->chosen];
        char rank[32], host[64], fit[64], pk[OUT_NUM], at[OUT_NUM], end[OUT_NUM], ooms[32];
        if (row->rank != SNAP_UNKNOWN_I64)
            snprintf(rank, sizeof rank, "%" PRId64, row->rank);
        else
            snprintf(rank, sizeof rank, "pid %" PRId64, row->pid);
        const char *h = out_fit(row->host ? row->host : "?", 20, fit, sizeof fit);
        if (row->local_rank != SNAP_UNKNOWN_I64)
            snprintf(host, sizeof host, "%s:%" PRId64, h, row->local_rank);
        else
            snprintf(host, sizeof host, "%s", h);
        snprintf(ooms, sizeof ooms, "%" PRIu64, row->ooms);
        const char *peak = fl->peak_device == SNAP_UNKNOWN_I64 ? "-" : out_bytes(fl->peak, pk);
        const char *when = fl->peak_device == SNAP_UNKNOWN_I64
                               ? "-" : out_duration(fl->peak_time_ns, at);
        char in[64];
        if (ranges)
            out_table_row(&t, rank, host, peak, when,
                          fl->peak_range ? out_fit(fl->peak_range, 32, in, sizeof in) : "-",
                          out_bytes(fl->end_bytes, end), ooms, row->reasons);
        else
            out_table_row(&t, rank, host, peak, when, out_bytes(fl->end_bytes, end), ooms,
                          row->reasons);
    }
    out_table_print(&t, f);
}

/* "ranks 2, 5-7 of 8 wrote no file" for the rank numbers below the world
 * size that have no row. */
static void print_missing(FILE *f, const struct ranks *r)
{
    if (r->world_size == SNAP_UNKNOWN_I64 || r->world_size <= 0)
        return;
    char list[256] = "";
    size_t used = 0, missing = 0;
    for (int64_t k = 0; k < r->world_size; k++) {
        if (ranks_find(r, k) != RANKS_NONE)
            continue;
        int64_t e = k;
        while (e + 1 < r->world_size && ranks_find(r, e + 1) == RANKS_NONE)
            e++;
        missing += (size_t)(e - k + 1);
        if (used + 32 < sizeof list) {
            int w = e > k ? snprintf(list + used, sizeof list - used, "%s%" PRId64 "-%" PRId64,
                                     used ? ", " : "", k, e)
                          : snprintf(list + used, sizeof list - used, "%s%" PRId64,
                                     used ? ", " : "", k);
            used += w > 0 ? (size_t)w : 0;
        }
        k = e;
    }
    if (missing == 0)
        return;
    char line[400];
    snprintf(line, sizeof line, "missing: rank%s %s of %" PRId64 " wrote no file here "
             "(still running, killed with SIGKILL, or CUMEMTRACE_OUTPUT points elsewhere)",
             missing == 1 ? "" : "s", list, r->world_size);
    out_wrap(f, "  ", "    ", line);
}

/* Ranks whose files come from several processes: a restarted job (torchrun
 * --max-restarts) or two runs in one directory. */
static void print_restarts(FILE *f, const struct ranks *r)
{
    char list[256] = "", who[96];
    size_t used = 0, n = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        if (!r->rows[i].several_pids)
            continue;
        if (n++ < LISTED_MAX && used + 100 < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     ranks_name(&r->rows[i], who, sizeof who));
    }
    if (n == 0)
        return;
    char line[512];
    snprintf(line, sizeof line, "restarted: %s%s %s files of several processes (a restarted "
             "job, or two runs in one directory); each row is its newest file - keep one "
             "run per directory to compare them", list, n > LISTED_MAX ? " and more" : "",
             n == 1 ? "has" : "have");
    out_wrap(f, "  ", "    ", line);
}

static void print_imbalance(FILE *f, const struct ranks *r)
{
    size_t n = 0;
    uint64_t *peaks = malloc((r->nrows ? r->nrows : 1) * sizeof *peaks);
    if (peaks == NULL)
        return;
    for (size_t i = 0; i < r->nrows; i++)
        if (r->files[r->rows[i].chosen].peak_device != SNAP_UNKNOWN_I64)
            peaks[n++] = r->files[r->rows[i].chosen].peak;
    if (n < 2) {
        free(peaks);
        return;
    }
    qsort(peaks, n, sizeof *peaks, by_u64);
    uint64_t median = n % 2 ? peaks[n / 2]
                            : peaks[n / 2 - 1] + (peaks[n / 2] - peaks[n / 2 - 1]) / 2;
    uint64_t max = peaks[n - 1];
    free(peaks);
    size_t top = 0;
    for (size_t i = 1; i < r->nrows; i++)
        if (r->files[r->rows[i].chosen].peak > r->files[r->rows[top].chosen].peak)
            top = i;
    char a[OUT_NUM], b[OUT_NUM], who[96], line[1024];
    size_t used = (size_t)snprintf(line, sizeof line, "imbalance: highest peak %s (%s) is "
                                   "%.2fx the median %s",
                                   out_bytes(max, a), ranks_name(&r->rows[top], who, sizeof who),
                                   median ? (double)max / (double)median : 0.0,
                                   out_bytes(median, b));
    size_t out = 0;
    for (size_t i = 0; i < r->nrows && median > 0; i++) {
        const struct rank_file *fl = &r->files[r->rows[i].chosen];
        if (fl->peak_device == SNAP_UNKNOWN_I64)
            continue;
        uint64_t d = fl->peak > median ? fl->peak - median : median - fl->peak;
        if ((unsigned __int128)d * 100 <= (unsigned __int128)median * STANDOUT_PCT)
            continue;
        if (out++ == LISTED_MAX || used + 48 >= sizeof line)
            continue;
        double pct = 100.0 * ((double)fl->peak - (double)median) / (double)median;
        used += (size_t)snprintf(line + used, sizeof line - used, "%s%s %+.0f%%",
                                 out == 1 ? "; standing out (over 10% from it): " : ", ",
                                 ranks_name(&r->rows[i], who, sizeof who), pct);
    }
    if (out > LISTED_MAX && used + 32 < sizeof line)
        snprintf(line + used, sizeof line - used, " and %zu more", out - LISTED_MAX);
    else if (out == 0 && used + 40 < sizeof line)
        snprintf(line + used, sizeof line - used, "; no rank over 10%% from it");
    out_wrap(f, "  ", "    ", line);
}

struct failure {
    size_t row;
    int64_t at; /* ns since the job's first start (or the rank's own start) */
};

static int by_at(const void *a, const void *b)
{
    const struct failure *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* Prints who failed first; returns that row, or RANKS_NONE. */
static size_t print_failures(FILE *f, const struct ranks *r)
{
    int64_t t0 = INT64_MAX;
    for (size_t i = 0; i < r->nrows; i++)
        if (r->rows[i].start_wall_ns != SNAP_UNKNOWN_I64 && r->rows[i].start_wall_ns < t0)
            t0 = r->rows[i].start_wall_ns;
    struct failure *v = malloc((r->nrows ? r->nrows : 1) * sizeof *v);
    if (v == NULL)
        return RANKS_NONE;
    size_t n = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        const struct rank_row *row = &r->rows[i];
        if (row->first_oom_ns == SNAP_UNKNOWN_I64)
            continue;
        v[n].row = i;
        v[n].at = row->first_oom_ns +
                  (row->first_oom_start_ns != SNAP_UNKNOWN_I64 && t0 != INT64_MAX
                       ? row->first_oom_start_ns - t0 : 0);
        n++;
    }
    if (n == 0) {
        free(v);
        fprintf(f, "  no rank ran out of memory\n");
        return RANKS_NONE;
    }
    qsort(v, n, sizeof *v, by_at);
    const struct rank_row *first = &r->rows[v[0].row];
    char who[96], at[OUT_NUM], b[OUT_NUM], dev[32], line[1024];
    if (first->first_oom_device < 0)
        snprintf(dev, sizeof dev, "pinned host memory");
    else
        snprintf(dev, sizeof dev, "device %" PRId64, first->first_oom_device);
    size_t used = (size_t)snprintf(line, sizeof line, "first failure: %s ran out of memory "
                                   "first, %s into the job, asking for %s on %s",
                                   ranks_name(first, who, sizeof who),
                                   out_duration(v[0].at, at),
                                   out_bytes(first->first_oom_bytes, b), dev);
    for (size_t i = 1; i < n && i <= LISTED_MAX && used + 48 < sizeof line; i++)
        used += (size_t)snprintf(line + used, sizeof line - used, "%s%s (+%s)",
                                 i == 1 ? "; then " : ", ",
                                 ranks_name(&r->rows[v[i].row], who, sizeof who),
                                 out_duration(v[i].at - v[0].at, at));
    if (n > LISTED_MAX + 1 && used + 32 < sizeof line)
        snprintf(line + used, sizeof line - used, " and %zu more", n - LISTED_MAX - 1);
    out_wrap(f, "  ", "    ", line);
    size_t row = v[0].row;
    free(v);
    return row;
}

static int print_sites(FILE *f, const struct ranks *r, unsigned top)
{
    if (r->nsites == 0)
        return 0;
    size_t *order = ranks_sites_sorted(r);
    if (order == NULL)
        return -1;
    uint64_t total = 0;
    for (size_t i = 0; i < r->nsites; i++)
        total += r->sites[i].total;
    char a[OUT_NUM];
    static const char *const what[] = {
        [RANKS_SEGMENTS] = "Call sites at each rank's peak",
        [RANKS_TENSORS_NOW] = "PyTorch's tensors by line, live in each rank's newest file",
        [RANKS_TENSORS_PEAK] = "PyTorch's tensors by line at each rank's peak",
    };
    bool tensors = r->moment != RANKS_SEGMENTS;
    fputc('\n', f);
    fprintf(f, "%s%s, summed over %zu rank%s (%s)%s\n", out_color(OUT_BOLD), what[r->moment],
            r->nrows, r->nrows == 1 ? "" : "s", out_bytes(total, a), out_color(OUT_RESET));
    if (r->moment == RANKS_TENSORS_NOW)
        out_wrap(f, "  ", "  ", "(at the failure of a post-mortem, else at the dump; the "
                 "peak's tensors were not recorded: PyTorch's layer reads them by default; "
                 "not under CUMEMTRACE_TORCH_PEAK=0, nor when its trace did not reach the "
                 "peak exactly)");
    struct out_table t;
    out_table_init(&t, "rrrrl", 2);
    out_table_row(&t, "total", "min", "max", "ranks", tensors ? "line" : "call site");
    size_t shown = r->nsites < top ? r->nsites : top;
    for (size_t k = 0; k < shown; k++) {
        const struct rank_site *s = &r->sites[order[k]];
        char tot[OUT_NUM], mn[OUT_NUM], mx[OUT_NUM], nr[48], note[600], who[96];
        /* A rank without the site held 0 there. */
        uint64_t min = s->nranks < r->nrows ? 0 : s->min;
        snprintf(nr, sizeof nr, "%" PRIu32 "/%zu", s->nranks, r->nrows);
        out_table_row(&t, out_bytes(s->total, tot), out_bytes(min, mn), out_bytes(s->max, mx),
                      nr, s->display);
        if (min != s->max)
            snprintf(note, sizeof note, "[max: %s]%s%s",
                     ranks_name(&r->rows[s->max_row], who, sizeof who),
                     s->callers[0] ? " " : "", s->callers);
        else
            snprintf(note, sizeof note, "%s", s->callers);
        if (note[0])
            out_table_note(&t, note);
    }
    if (r->nsites > shown) {
        uint64_t rest = 0;
        for (size_t k = shown; k < r->nsites; k++)
            rest += r->sites[order[k]].total;
        char b[OUT_NUM], more[64];
        snprintf(more, sizeof more, "(%zu more %s)", r->nsites - shown,
                 tensors ? "lines" : "call sites");
        out_table_row(&t, out_bytes(rest, b), "", "", "", more);
    }
    free(order);
    return out_table_print(&t, f);
}

/* ---- one process's files ---- */

static const struct ranks *order_of; /* for file_order and by_time */

/* When a file's state is from: a post-mortem's failure (its file may be
 * rewritten later, as its chain ends), else when it was written. */
static int64_t state_time(const struct rank_file *f)
{
    return f->oom && f->oom_time_ns != SNAP_UNKNOWN_I64 ? f->oom_time_ns : f->dump_time_ns;
}

/* In the order of their states: on the wall clock when both know it (the
 * images of an exec chain each count from their own start), else since
 * the process started; then as listed. */
static int by_time(const void *a, const void *b)
{
    const struct rank_file *f = &order_of->files[*(const size_t *)a];
    const struct rank_file *g = &order_of->files[*(const size_t *)b];
    int64_t x = state_time(f), y = state_time(g);
    if (f->dump_wall_ns != SNAP_UNKNOWN_I64 && g->dump_wall_ns != SNAP_UNKNOWN_I64 &&
        f->dump_time_ns != SNAP_UNKNOWN_I64 && g->dump_time_ns != SNAP_UNKNOWN_I64) {
        x += f->dump_wall_ns - f->dump_time_ns;
        y += g->dump_wall_ns - g->dump_time_ns;
    }
    if (x != y)
        return x < y ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* The files of row `row`, in the order written (malloc'd; NULL on OOM). */
static size_t *row_files(const struct ranks *r, size_t row, size_t *n)
{
    size_t *v = malloc((r->nfiles ? r->nfiles : 1) * sizeof *v);
    if (v == NULL)
        return NULL;
    *n = 0;
    for (size_t i = 0; i < r->nfiles; i++)
        if (r->files[i].row == row)
            v[(*n)++] = i;
    order_of = r;
    qsort(v, *n, sizeof *v, by_time);
    return v;
}

/* A snapshot that ends a process's record (exit, signal, exec, killed),
 * rather than one taken on the way (periodic, api) or at a failure. */
static bool final_reason(const char *reason)
{
    return strcmp(reason, "periodic") != 0 && strcmp(reason, "api") != 0 &&
           strcmp(reason, "oom") != 0;
}

/* The file of a row to detail: its first failure's post-mortem (why it
 * failed), else its last final snapshot (what it still held), else its
 * newest. */
static size_t row_detail(const struct ranks *r, size_t row)
{
    const struct rank_row *rw = &r->rows[row];
    if (rw->postmortem != RANKS_NONE)
        return rw->postmortem;
    size_t n, best = rw->chosen, *v = row_files(r, row, &n);
    if (v == NULL)
        return best;
    for (size_t k = n; k-- > 0;)
        if (!r->files[v[k]].oom && final_reason(r->files[v[k]].reason)) {
            best = v[k];
            break;
        }
    free(v);
    return best;
}

/* Length of the part of the files' paths shared by all, up to the last dot
 * of their common name ("dir/cumemtrace.python.4242"), so each row names
 * its file by what differs (".oom.0.json"). */
static size_t common_stem(const struct ranks *r, const size_t *v, size_t n)
{
    const char *a = r->files[v[0]].shown;
    size_t len = strlen(a);
    for (size_t k = 1; k < n; k++) {
        const char *b = r->files[v[k]].shown;
        size_t i = 0;
        while (i < len && a[i] == b[i])
            i++;
        len = i;
    }
    if (n == 1)
        len = 0;
    size_t slash = 0, dot = 0, prev = 0;
    for (size_t i = 0; i < len; i++) {
        if (a[i] == '/') {
            slash = i + 1;
            dot = prev = 0;
        } else if (a[i] == '.') {
            prev = dot;
            dot = i;
        }
    }
    /* "x.exec.0.json", "x.exec.1.json": each row keeps its reason */
    static const char *const reasons[] = {".exec", ".oom", ".periodic", ".api", ".signal"};
    for (size_t k = 0; dot > slash && prev > slash && k < sizeof reasons / sizeof *reasons; k++)
        if (dot - prev == strlen(reasons[k]) && strncmp(a + prev, reasons[k], dot - prev) == 0)
            dot = prev;
    return dot > slash ? dot : slash;
}

/* Two snapshots taken on the way that say the same (periodic ones while
 * nothing moved): one row.  Each final one (an exec chain's images) and
 * each post-mortem keeps its own. */
static bool alike(const struct rank_file *x, const struct rank_file *y)
{
    return !x->oom && !final_reason(x->reason) && strcmp(x->reason, y->reason) == 0 &&
           x->peak == y->peak &&
           x->peak_device == y->peak_device && x->peak_time_ns == y->peak_time_ns &&
           x->end_bytes == y->end_bytes;
}

/* A line per file of row `row` (alike ones merged): why it was written,
 * when, its peak, what it held at the end; the detailed one says where it
 * is ("detailed <where>", unless NULL).  Returns -1 when out of memory. */
static int print_files(FILE *f, const struct ranks *r, size_t row, size_t detail,
                       const char *where)
{
    size_t n, *v = row_files(r, row, &n);
    if (v == NULL)
        return -1;
    size_t stem = n ? common_stem(r, v, n) : 0;
    if (stem > 0) {
        /* One line, cut in the middle (--full: whole): each file's own
         * report heading names it in full. */
        char line[4200], fit[4200];
        const char *a = r->files[v[0]].shown;
        bool dir = a[stem - 1] == '/'; /* no name in common: where they are */
        snprintf(line, sizeof line, "%.*s%s", (int)stem, a, dir ? "" : "*");
        fprintf(f, "  files%s %s\n", dir ? " in" : ":",
                out_fit(line, OUT_WIDTH - 11, fit, sizeof fit));
    }
    struct out_table t;
    out_table_init(&t, "lrrrrl", 2);
    out_table_row(&t, "written", "at", "peak", "peak at", "at end", "file");
    for (size_t k = 0; k < n;) {
        const struct rank_file *fl = &r->files[v[k]];
        size_t same = 1;
        while (v[k] != detail && k + same < n && v[k + same] != detail &&
               alike(fl, &r->files[v[k + same]]))
            same++;
        char at[OUT_NUM], pk[OUT_NUM], pat[OUT_NUM], end[OUT_NUM], note[4400] = "";
        bool none = fl->peak_device == SNAP_UNKNOWN_I64;
        out_table_row(&t, fl->reason, out_duration(state_time(fl), at),
                      none ? "-" : out_bytes(fl->peak, pk),
                      none ? "-" : out_duration(fl->peak_time_ns, pat),
                      out_bytes(fl->end_bytes, end), fl->shown + stem);
        size_t used = 0;
        if (fl->oom) {
            char b[OUT_NUM], dev[32];
            if (fl->oom_device < 0)
                snprintf(dev, sizeof dev, "pinned host memory");
            else
                snprintf(dev, sizeof dev, "device %" PRId64, fl->oom_device);
            used += (size_t)snprintf(note, sizeof note, "out of memory: %s asked for on %s",
                                     out_bytes(fl->oom_bytes, b), dev);
        }
        if (v[k] == detail && where != NULL)
            snprintf(note + used, sizeof note - used, "%sdetailed %s", used ? "; " : "", where);
        if (same > 1) {
            const struct rank_file *last = &r->files[v[k + same - 1]];
            if (same == 2)
                snprintf(note, sizeof note, "and %s at %s, alike", last->shown + stem,
                         out_duration(state_time(last), at));
            else
                snprintf(note, sizeof note, "and %zu more alike, the last %s at %s",
                         same - 1, last->shown + stem, out_duration(state_time(last), at));
        }
        if (note[0])
            out_table_note(&t, note);
        k += same;
    }
    free(v);
    return out_table_print(&t, f);
}

/* `report` of one process's files (its post-mortems, exit snapshot,
 * periodic ones): who it was, a line per file, then one of them in detail
 * (row_detail) - the others' tables would repeat the same holders. */
static int report_one_process(FILE *f, const struct ranks *r, size_t *detail)
{
    const struct rank_row *row = &r->rows[0];
    char who[96], title[256];
    snprintf(title, sizeof title, "cumemtrace report: %s%s%s%s, %zu files",
             ranks_name(row, who, sizeof who), row->exe ? " (" : "", row->exe ? row->exe : "",
             row->exe ? ")" : "", r->nfiles);
    const char *hint = report_options.full ? ", each in full below" : "; --full: each in full";
    bool fits = out_width(title) + strlen(hint) <= OUT_WIDTH;
    fprintf(f, "%s%s%s%s%s\n", out_color(OUT_BOLD), title, out_color(OUT_RESET),
            fits ? hint : "\n  ", fits ? "" : hint + 2);
    print_restarts(f, r);
    *detail = row_detail(r, 0);
    if (print_files(f, r, 0, *detail, report_options.full ? NULL : "below") != 0)
        return -1;
    fputc('\n', f);
    return 0;
}

/* The per-rank view of `report`; sets *detail to the file to detail below
 * it (the post-mortem of the first rank to fail, else the newest file of
 * the rank with the highest peak).  Returns 0, or -1 when out of memory. */
static int ranks_report(FILE *f, const struct ranks *r, unsigned top, size_t *detail)
{
    char title[160], ws[48] = "";
    if (r->world_size != SNAP_UNKNOWN_I64)
        snprintf(ws, sizeof ws, " (world size %" PRId64 ")", r->world_size);
    snprintf(title, sizeof title, "cumemtrace report: %zu rank%s%s, %zu file%s", r->nrows,
             r->nrows == 1 ? "" : "s", ws, r->nfiles, r->nfiles == 1 ? "" : "s");
    if (r->nrows == 1 && r->nfiles > 1)
        return report_one_process(f, r, detail);
    fprintf(f, "%s%s%s\n", out_color(OUT_BOLD), title, out_color(OUT_RESET));
    print_table(f, r);
    print_missing(f, r);
    print_restarts(f, r);
    print_imbalance(f, r);
    size_t failed = print_failures(f, r);
    if (print_sites(f, r, top) != 0)
        return -1;
    size_t best = 0;
    for (size_t i = 1; i < r->nrows; i++)
        if (r->files[r->rows[i].chosen].peak > r->files[r->rows[best].chosen].peak)
            best = i;
    char who[96], line[1200];
    if (failed != RANKS_NONE && r->rows[failed].postmortem != RANKS_NONE) {
        *detail = r->rows[failed].postmortem;
        snprintf(line, sizeof line, "detailed below: the post-mortem of %s, the first to "
                 "fail; one rank: cumemtrace report --rank N",
                 ranks_name(&r->rows[failed], who, sizeof who));
    } else {
        *detail = r->nrows ? r->rows[best].chosen : RANKS_NONE;
        snprintf(line, sizeof line, "detailed below: %s, the highest peak; one rank: "
                 "cumemtrace report --rank N", ranks_name(&r->rows[best], who, sizeof who));
    }
    fputc('\n', f);
    out_wrap(f, "", "  ", line);
    fputc('\n', f);
    return 0;
}

/* One file of the merge, loaded and reported in full. */
static int detail_file(const char *path, bool json, unsigned top)
{
    struct cli_inputs in;
    char *p = (char *)path;
    if (cli_load(&in, &p, 1) != 0)
        return CLI_EXIT_ERROR;
    int rc = json ? report_json(stdout, in.snaps, 1, top) : report_text(stdout, in.snaps, 1, top);
    cli_inputs_free(&in);
    return rc;
}

/* OOM post-mortems first, each kind in the order written. */
static int file_order(const void *a, const void *b)
{
    const struct rank_file *x = &order_of->files[*(const size_t *)a];
    const struct rank_file *y = &order_of->files[*(const size_t *)b];
    if (x->oom != y->oom)
        return x->oom ? -1 : 1;
    if (x->dump_wall_ns != y->dump_wall_ns)
        return x->dump_wall_ns < y->dump_wall_ns ? -1 : 1;
    if (x->dump_time_ns != y->dump_time_ns)
        return x->dump_time_ns < y->dump_time_ns ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Every file of a one-process merge in full, the post-mortems first (the
 * exit snapshot alone would hide why it failed). */
static int detail_each(const struct ranks *r, unsigned top)
{
    size_t *order = malloc(r->nfiles * sizeof *order);
    if (order == NULL)
        return -1;
    for (size_t i = 0; i < r->nfiles; i++)
        order[i] = i;
    order_of = r;
    qsort(order, r->nfiles, sizeof *order, file_order);
    int rc = 0;
    for (size_t i = 0; i < r->nfiles && rc == 0; i++) {
        if (i > 0)
            fputc('\n', stdout);
        rc = detail_file(r->files[order[i]].path, false, top);
    }
    free(order);
    return rc;
}

int ranks_report_main(char **paths, size_t n, bool json, unsigned top, bool one,
                      int64_t rank)
{
    struct ranks r;
    if (ranks_merge(&r, paths, n, false) != 0)
        return CLI_EXIT_ERROR;
    ranks_use(&r, ranks_best(&r));
    size_t detail = RANKS_NONE;
    int rc = 0;
    if (one) {
        size_t row = ranks_find(&r, rank);
        if (row == RANKS_NONE) {
            /* The ranks present as ranges ("0-3, 5"); rows are in rank order. */
            char have[256] = "";
            size_t used = 0;
            for (size_t i = 0; i < r.nrows && r.rows[i].rank != SNAP_UNKNOWN_I64 &&
                               used + 48 < sizeof have; i++) {
                size_t j = i;
                while (j + 1 < r.nrows && r.rows[j + 1].rank == r.rows[j].rank + 1)
                    j++;
                used += (size_t)(j > i ? snprintf(have + used, sizeof have - used,
                                                  "%s%" PRId64 "-%" PRId64, used ? ", " : "",
                                                  r.rows[i].rank, r.rows[j].rank)
                                       : snprintf(have + used, sizeof have - used,
                                                  "%s%" PRId64, used ? ", " : "",
                                                  r.rows[i].rank));
                i = j;
            }
            cli_usage("report", "no file of rank %" PRId64 " among the %zu given (%s%s)",
                      rank, r.nfiles, used ? "ranks present: " : "no file names a rank",
                      have);
            ranks_free(&r);
            return CLI_EXIT_ERROR;
        }
        detail = r.rows[row].chosen;
        rc = detail_file(r.files[detail].path, json, top);
        if (rc == 0 && !json && r.rows[row].nfiles > 1) {
            fprintf(stdout, "\nFiles of this rank\n");
            rc = print_files(stdout, &r, row, detail, "above");
        }
    } else {
        rc = ranks_report(stdout, &r, top, &detail);
        if (rc == 0 && r.nrows == 1 && r.nfiles > 1 && report_options.full)
            rc = detail_each(&r, top);
        else if (rc == 0 && detail != RANKS_NONE)
            rc = detail_file(r.files[detail].path, false, top);
    }
    ranks_free(&r);
    if (rc == CLI_EXIT_ERROR)
        return rc;
    if (rc != 0) {
        fprintf(stderr, "cumemtrace: report: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    return cli_finish_stdout() ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
