/* report.c - `cumemtrace report FILE...`: what a tired engineer reads first.
 *
 * Layout, top to bottom: who wrote the file; for an OOM post-mortem the
 * failure (request, device line, cause, retries, holders, advice); then per
 * device the peak and when, kinds, call sites at the peak, what is still
 * live, fragmentation; host-pinned memory; counters.  Every line fits
 * OUT_WIDTH columns: long call-site names are cut in the middle, prose is
 * wrapped.  Call sites are summed under BY_STACK (frames.h), so two stacks
 * that differ only in unsymbolised offsets show as one site.
 */
#include "report.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "cli.h"
#include "frame_filter.h"
#include "frames.h"
#include "holders.h"
#include "out.h"
#include "oom_causes.h"
#include "oom_text.h"
#include "ranks.h"
#include "report_allocator.h"
#include "report_layout.h"
#include "report_phases.h"
#include "report_churn.h"
#include "report_holders.h"
#include "sites.h"
#include "snapshot_phases.h"

/* A recorded string as text output may print it (snapshot_display). */
#define TEXT(snap, str) snapshot_display((snap)->ctx, (str))

#define CALLERS_SHOWN 3 /* frames on a call site's "<" line */
#define CALLERS_FULL 64 /* with --full */

struct report_options report_options; /* zero: by allocations, by call site, one screen */
#define OOM_ROWS 5 /* holders shown in a post-mortem without --full */

size_t report_pick(struct snapshot **s, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (snapshot_max_peak(s[i]) > snapshot_max_peak(s[best]))
            best = i;
    return best;
}

static const char *kinds_text(uint8_t bits)
{
    int only = -1;
    for (int k = 0; k < KIND_COUNT; k++) {
        if (bits & (1u << k)) {
            if (only >= 0)
                return "mixed";
            only = k;
        }
    }
    return only >= 0 ? snapshot_kind_name(only) : "";
}

/* A table of call sites: bytes, % of `whole`, count, [kind], site, and each
 * site's callers on a line below.  Returns -1 on OOM. */
static int print_sites(FILE *f, struct snapshot *s, const struct snap_groups *g,
                       uint64_t whole, unsigned top, bool with_kind, int indent)
{
    struct sites_sum sum;
    if (sites_sum_sorted(&sum, s, g) != 0)
        return -1;
    struct out_table t;
    out_table_init(&t, with_kind ? "rrrll" : "rrrl", indent);
    if (with_kind)
        out_table_row(&t, "bytes", "%", "count", "kind", "call site");
    else
        out_table_row(&t, "bytes", "%", "count", "call site");
    size_t shown = sum.ntouched < top ? sum.ntouched : top;
    uint64_t rest_bytes = 0, rest_count = 0;
    for (size_t i = 0; i < sum.ntouched; i++) {
        uint32_t id = sum.touched[i];
        if (i >= shown) {
            rest_bytes += sum.bytes[id];
            rest_count += sum.count[id];
            continue;
        }
        char b[OUT_NUM], p[OUT_NUM], c[OUT_NUM], via[4096];
        const struct site *site = frames_site_get(s->ctx, BY_STACK, id);
        snprintf(c, sizeof c, "%" PRIu64, sum.count[id]);
        if (with_kind)
            out_table_row(&t, out_bytes(sum.bytes[id], b), out_pct(sum.bytes[id], whole, p), c,
                      kinds_text(sum.kinds[id]), site->display);
        else
            out_table_row(&t, out_bytes(sum.bytes[id], b), out_pct(sum.bytes[id], whole, p), c,
                      site->display);
        frames_callers(site->snap, site->stack,
                       OUT_WIDTH >= OUT_WIDTH_FULL ? CALLERS_FULL : CALLERS_SHOWN, via,
                       sizeof via);
        if (via[0])
            out_table_note(&t, via);
    }
    if (sum.ntouched > shown) {
        char b[OUT_NUM], p[OUT_NUM], c[OUT_NUM], more[64];
        snprintf(c, sizeof c, "%" PRIu64, rest_count);
        snprintf(more, sizeof more, "(%zu more call sites)", sum.ntouched - shown);
        if (with_kind)
            out_table_row(&t, out_bytes(rest_bytes, b), out_pct(rest_bytes, whole, p), c, "",
                      more);
        else
            out_table_row(&t, out_bytes(rest_bytes, b), out_pct(rest_bytes, whole, p), c, more);
    }
    sites_free(&sum);
    return out_table_print(&t, f);
}

static uint64_t groups_bytes(const struct snap_groups *g, uint64_t *count)
{
    uint64_t b = 0, c = 0;
    for (size_t i = 0; i < g->n; i++) {
        b += g->v[i].bytes;
        c += g->v[i].count;
    }
    if (count)
        *count = c;
    return b;
}

static void heading(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void heading(FILE *f, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fputs(out_color(OUT_BOLD), f);
    out_wrap(f, "", "  ", line);
    fputs(out_color(OUT_RESET), f);
}

/* A wrapped paragraph at an indent: prefix for the first line, the same
 * width of blanks for the others. */
static void para(FILE *f, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void para(FILE *f, int indent, const char *fmt, ...)
{
    char text[1024], first[32], rest[40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(first, sizeof first, "%*s", indent, "");
    snprintf(rest, sizeof rest, "%*s", indent + 2, "");
    out_wrap(f, first, rest, text);
}

/* A labelled line of the post-mortem: "  label:    text", wrapped under
 * the text. */
static void field(FILE *f, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void field(FILE *f, const char *label, const char *fmt, ...)
{
    char text[1024], first[40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(first, sizeof first, "  %-10s", label);
    out_wrap(f, first, "            ", text);
}

/* ---- header ---- */

/* snprintf at buf + *used, never past n (snprintf returns what it would
 * have written, which can exceed what fits). */
static void append(char *buf, size_t n, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t n, size_t *used, const char *fmt, ...)
{
    if (*used >= n - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, n - *used, fmt, ap);
    va_end(ap);
    if (w > 0)
        *used = *used + (size_t)w < n - 1 ? *used + (size_t)w : n - 1;
}

static void print_header(FILE *f, const struct snapshot *s)
{
    const struct snap_process *p = &s->process;
    char who[256], when[OUT_NUM], extra[160] = "";
    size_t w = 0;
    who[0] = '\0';
    append(who, sizeof who, &w, "%s", p->exe ? TEXT(s, p->exe) : "?");
    if (p->pid != SNAP_UNKNOWN_I64)
        append(who, sizeof who, &w, " (pid %" PRId64 "%s", p->pid,
               p->rank != SNAP_UNKNOWN_I64 ? "" : ")");
    if (p->rank != SNAP_UNKNOWN_I64)
        append(who, sizeof who, &w, "%srank %" PRId64 ")",
               p->pid != SNAP_UNKNOWN_I64 ? ", " : " (", p->rank);
    if (p->host != NULL)
        append(who, sizeof who, &w, " on %s", TEXT(s, p->host));
    if (p->dump_time_ns != SNAP_UNKNOWN_I64)
        snprintf(extra, sizeof extra, " at %s", out_duration(p->dump_time_ns, when));
    heading(f, "cumemtrace report: %s", TEXT(s, s->file));
    char sig[64] = "";
    if (s->signal != NULL) /* which signal ended it (docs/snapshot-format.md) */
        snprintf(sig, sizeof sig, " (%s)", TEXT(s, s->signal));
    para(f, 2, "%s; %s snapshot%s%s", who, TEXT(s, s->reason), sig, extra);
    if (p->ncmdline > 0) {
        char cmd[1024];
        size_t used = 0;
        cmd[0] = '\0';
        for (size_t i = 0; i < p->ncmdline; i++)
            append(cmd, sizeof cmd, &used, "%s%s", i ? " " : "", TEXT(s, p->cmdline[i]));
        char fit[1024];
        fprintf(f, "  command: %s\n",
                out_fit(cmd, OUT_WIDTH - 11, fit, sizeof fit));
    }
    for (size_t i = 0; i < s->config.nlimits; i++) {
        char b[OUT_NUM];
        fprintf(f, "  limit: %s on device %" PRId64 " (CUMEMTRACE_LIMIT)\n",
                out_bytes(s->config.limits[i].bytes, b), s->config.limits[i].device);
    }
    if (frame_filter_focus_text() != NULL)
        para(f, 2, "focus: only call sites whose stack has a frame matching '%s' "
                   "(--focus); totals are the whole process's",
             TEXT(s, frame_filter_focus_text()));
}

/* ---- OOM post-mortem ---- */

static void print_cause(FILE *f, const struct snapshot *s)
{
    char text[1024];
    field(f, "cause:", "%s", oom_causes_line(s, text, sizeof text));
}

static void print_retries(FILE *f, const struct snap_oom *o)
{
    char a[OUT_NUM], tail[128] = "";
    const char *outcome = o->recovered == 1   ? "recovered on a later attempt"
                          : o->recovered == 0 ? "not recovered"
                                              : "outcome unknown";
    if (o->released_bytes != SNAP_UNKNOWN && o->released_bytes > 0)
        snprintf(tail, sizeof tail, "; %s released by %" PRIu64 " free%s in between",
                 out_bytes(o->released_bytes, a),
                 o->released_count != SNAP_UNKNOWN ? o->released_count : 0,
                 out_plural(o->released_count != SNAP_UNKNOWN ? o->released_count : 0));
    else if (o->attempts != SNAP_UNKNOWN && o->attempts > 1)
        snprintf(tail, sizeof tail, "; nothing released in between");
    if (o->attempts == SNAP_UNKNOWN)
        field(f, "retries:", "%s%s", outcome, tail);
    else
        field(f, "retries:", "%" PRIu64 " failed attempt%s%s; %s", o->attempts,
             o->attempts == 1 ? "" : "s", tail, outcome);
}

/* One of the post-mortem's call-site tables, under a heading giving its
 * total; nothing when the groups are empty.  Returns -1 on OOM. */
static int oom_table(FILE *f, struct snapshot *s, const struct snap_groups *g,
                     const char *title, const char *what, const char *suffix,
                     unsigned top, bool with_kind)
{
    char a[OUT_NUM];
    if (g->n == 0)
        return 0;
    uint64_t count, total = groups_bytes(g, &count);
    fputc('\n', f);
    heading(f, "  %s (%s in %" PRIu64 " %s%s)%s", title, out_bytes(total, a), count,
            what, out_plural(count), suffix);
    return print_sites(f, s, g, total, top, with_kind, 2);
}

/* PyTorch's tensors by line under a heading with their total (and what
 * --focus kept of it), a screen of lines unless --full, then the cache
 * row.  Returns -1 on OOM. */
static int print_tensors(FILE *f, struct snapshot *s, const struct holders *h,
                         const char *title, unsigned top)
{
    char a[OUT_NUM], b[OUT_NUM], when[96] = "";
    fputc('\n', f);
    if (h->time_ns != SNAP_UNKNOWN_I64) {
        char t[OUT_NUM], step[48] = "";
        if (h->step != SNAP_UNKNOWN_I64 && h->step > 0)
            snprintf(step, sizeof step, ", step %" PRId64, h->step);
        snprintf(when, sizeof when, " (%s%s)", out_duration(h->time_ns, t), step);
    }
    if (frame_filter_focus_text() != NULL)
        heading(f, "  %s%s: %s of PyTorch's tensors (%s in focus), by line", title, when,
                out_bytes(h->total_bytes, a), out_bytes(h->bytes, b));
    else
        heading(f, "  %s%s: %s of PyTorch's tensors, by line", title, when,
                out_bytes(h->total_bytes, a));
    unsigned rows = report_options.full ? 0
                    : top > REPORT_HOLDERS_SCREEN ? top : REPORT_HOLDERS_SCREEN;
    if (h->n == 0 && !h->has_more)
        para(f, 4, "no live tensors%s", frame_filter_focus_text() != NULL ? " in focus" : "");
    else if (report_holders_table(f, s, h, h->total_bytes, rows, 2) != 0)
        return -1;
    return 0;
}

static int print_oom(FILE *f, struct snapshot *s, unsigned top)
{
    const struct snap_oom *o = &s->oom;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], d[OUT_NUM], t[OUT_NUM];
    char dev[32];
    if (o->device < 0)
        snprintf(dev, sizeof dev, "host (pinned)");
    else
        snprintf(dev, sizeof dev, "device %" PRId64, o->device);
    fputc('\n', f);
    fprintf(f, "%s%sOUT OF MEMORY on %s at %s%s\n", out_color(OUT_BOLD), out_color(OUT_RED),
            dev, out_duration(o->time_ns, t), out_color(OUT_RESET));
    char sentence[512];
    if (oom_causes_allocator(o, sentence, sizeof sentence)[0])
        out_wrap(f, "  ", "  ", sentence);
    char thread[48] = "";
    if (o->thread != SNAP_UNKNOWN_I64)
        snprintf(thread, sizeof thread, ", thread %" PRId64, o->thread);
    uint64_t user = oom_text_request(o);
    if (oom_cause_row(o->cause)->by_allocator)
        field(f, "request:", "%s of %s, refused by %s itself (no CUDA call)%s",
              out_bytes(user, a), snapshot_kind_phrase(o->kind),
              oom_text_allocator(&o->allocator), thread);
    else if (user != o->requested_bytes)
        field(f, "request:", "%s from %s; the call that failed: %s of %s of %s%s",
              out_bytes(user, a), oom_text_allocator(&o->allocator),
              o->entry_point ? TEXT(s, o->entry_point) : "?", out_bytes(o->requested_bytes, b),
              snapshot_kind_phrase(o->kind), thread);
    else
        field(f, "request:", "%s of %s via %s%s", out_bytes(o->requested_bytes, a),
              snapshot_kind_phrase(o->kind), o->entry_point ? TEXT(s, o->entry_point) : "?",
              thread);
    if (o->device >= 0) {
        char label[40];
        snprintf(label, sizeof label, "%s:", dev);
        field(f, label, "total %s | free %s | this process %s",
              out_bytes(o->total_bytes, a), out_bytes(o->free_bytes, b),
              out_bytes(o->tracked_bytes, c));
        field(f, "", "untracked %s (CUDA context, other libraries, other processes)",
              out_bytes(o->untracked_bytes, d));
    }
    report_allocator_lines(f, s->ctx, o);
    print_cause(f, s);
    report_layout_lines(f, o);
    print_retries(f, o);
    if (o->stack != SNAP_NO_STACK) {
        const struct snap_stack *st = &s->stacks[o->stack];
        int pos = frames_label_pos(s->ctx, st);
        char via[512], line[1024], fit[1024];
        /* As many callers as fit, rather than a line cut in the middle. */
        for (unsigned shown = CALLERS_SHOWN + 1; shown-- > 0;) {
            frames_callers(s, o->stack, shown, via, sizeof via);
            snprintf(line, sizeof line, "%s%s%s",
                     pos >= 0 ? s->ctx->frames[st->frames[pos]].display : TEXT(s, st->entry),
                     via[0] ? " " : "", via);
            if (out_width(line) <= OUT_WIDTH - 12)
                break;
        }
        fprintf(f, "  %-10s%s\n", "stack:", out_fit_chain(line, OUT_WIDTH - 12, fit, sizeof fit));
    }
    char node[1024];
    if (oom_text_origin(s, node, sizeof node)[0])
        field(f, "node:", "%s", node);
    char when[640];
    if (report_allocator_when(s, o->phase, o->allocator.present ? o->allocator.step
                                                                : SNAP_UNKNOWN_I64,
                              when, sizeof when)[0])
        field(f, "during:", "%s", when);
    struct holders h;
    if (holders_get(s, NULL, HOLDERS_OOM, false, &h) != 0)
        return -1;
    if (h.source == HOLDERS_TENSORS) {
        int rc = print_tensors(f, s, &h, "Holders at the failure", top);
        report_holders_cache(f, &h, NULL, 2);
        if (rc != 0)
            return -1;
    }
    /* PyTorch's tensors are who holds it; the driver-level table says
     * which line first created each cached segment. */
    bool tensors = h.source == HOLDERS_TENSORS ||
                   (o->allocator.present && o->allocator.has_top && o->allocator.ntop > 0);
    holders_free(&h);
    if (holders_segments() && o->allocator.present)
        tensors = false; /* the driver's view was asked for: it is the holders */
    /* Without --full the tensors, when known, are the one holders table. */
    if ((report_options.full || !tensors) &&
        oom_table(f, s, &o->live,
                  tensors || (holders_segments() && o->allocator.present)
                      ? "Cached segments at the failure, by the line that created them"
                      : "Top holders at the failure",
                  "allocation", "", report_options.full || top < OOM_ROWS ? top : OOM_ROWS,
                  true) != 0)
        return -1;
    if (report_options.full && oom_table(f, s, &o->released, "Released between attempts", "free",
                                 ", by call site", top, false) != 0)
        return -1;
    return 0;
}

static int print_advice(FILE *f, struct snapshot *s)
{
    struct advice adv[ADVICE_MAX];
    int n = advice_compute(s, adv);
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    fputc('\n', f);
    fprintf(f, "%s%sAdvice%s\n", out_color(OUT_BOLD), out_color(OUT_YELLOW),
            out_color(OUT_RESET));
    for (int i = 0; i < n; i++)
        out_wrap(f, "  * ", "    ", adv[i].text);
    return 0;
}

/* ---- devices ---- */

/* The device's kinds (format.h's by_kind keys), those that saw any use. */
static void print_kinds(FILE *f, const struct snap_kind_stats *k)
{
    struct out_table t;
    out_table_init(&t, "lrrrrr", 2);
    out_table_row(&t, "kind", "current", "peak", "allocs", "frees", "failures");
    for (int i = 0; i < DEVICE_KINDS; i++) {
        const struct snap_kind_stats *ks = &k[i];
        if (ks->allocs == 0 && ks->frees == 0 && ks->failures == 0 &&
            ks->peak_bytes == 0 && ks->current_bytes == 0)
            continue;
        char c[OUT_NUM], p[OUT_NUM], al[32], fr[32], fa[32];
        snprintf(al, sizeof al, "%" PRIu64, ks->allocs);
        snprintf(fr, sizeof fr, "%" PRIu64, ks->frees);
        snprintf(fa, sizeof fa, "%" PRIu64, ks->failures);
        out_table_row(&t, snapshot_kind_name(i), out_bytes(ks->current_bytes, c),
                  out_bytes(ks->peak_bytes, p), al, fr, fa);
    }
    if (t.nrows > 1)
        out_table_print(&t, f);
    else
        out_table_free(&t);
}

/* PyTorch's cache, from its own figures: what it reserved and did not hand
 * to tensors, which the driver's granularity line cannot see. */
static void print_cache(FILE *f, const struct snapshot *s, const struct snap_device *d)
{
    const struct snap_allocator *al = &d->allocator;
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], e[OUT_NUM], p[OUT_NUM];
    if (!al->present || al->reserved_bytes == SNAP_UNKNOWN ||
        al->allocated_bytes == SNAP_UNKNOWN || al->reserved_bytes < al->allocated_bytes)
        return;
    uint64_t cached = al->reserved_bytes - al->allocated_bytes;
    char split[160] = "";
    if (al->inactive_split_bytes != SNAP_UNKNOWN)
        snprintf(split, sizeof split, ", %s of it inactive split (free parts of segments "
                 "that also hold live tensors)", out_bytes(al->inactive_split_bytes, e));
    para(f, 4, "%s's cache: %s reserved, %s in tensors - %s (%s of reserved) cached in "
         "freed blocks%s",
         oom_text_allocator(al), out_bytes(al->reserved_bytes, a),
         out_bytes(al->allocated_bytes, b), out_bytes(cached, c),
         out_pct(cached, al->reserved_bytes, p), split);
    uint64_t peak = report_allocator_peak(s, d);
    if (peak != SNAP_UNKNOWN && d->peak_bytes > peak)
        para(f, 4, "at its peak this process held %s on the device, %s more than %s's "
             "tensors ever held at once (%s, max_memory_allocated)",
             out_bytes(d->peak_bytes, a), out_bytes(d->peak_bytes - peak, b),
             oom_text_allocator(al), out_bytes(peak, c));
}

static void print_frag(FILE *f, const struct snapshot *s, const struct snap_device *d)
{
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], e[OUT_NUM], p[OUT_NUM];
    const struct snap_frag *fr = &d->frag;
    bool any = fr->present || d->vmm.present || d->nhist > 0 || d->allocator.present;
    if (!any)
        return;
    heading(f, "  Fragmentation");
    if (fr->present) {
        uint64_t waste = fr->rounded_bytes > fr->requested_bytes
                             ? fr->rounded_bytes - fr->requested_bytes
                             : 0;
        para(f, 4, "granularity %s: live requested %s, rounded %s, waste %s (%s)",
             out_bytes(fr->granularity_bytes, a), out_bytes(fr->requested_bytes, b),
             out_bytes(fr->rounded_bytes, c), out_bytes(waste, e),
             out_pct(waste, fr->rounded_bytes, p));
    }
    print_cache(f, s, d);
    if (fr->present)
        para(f, 4, "small allocations (under 1 MiB): %" PRIu64 " holding %s",
             fr->small_count, out_bytes(fr->small_bytes, a));
    if (d->vmm.present && (d->vmm.reserved_bytes || d->vmm.reserved_peak_bytes ||
                           d->vmm.physical_bytes)) {
        para(f, 4, "VMM: reserved %s, mapped %s, physical %s (peaks: reserved %s, "
                   "mapped %s)",
             out_bytes(d->vmm.reserved_bytes, a), out_bytes(d->vmm.mapped_bytes, b),
             out_bytes(d->vmm.physical_bytes, c), out_bytes(d->vmm.reserved_peak_bytes, e),
             out_bytes(d->vmm.mapped_peak_bytes, p));
    }
    if (d->nhist > 0) {
        struct out_table t;
        out_table_init(&t, "lrr", 4);
        out_table_row(&t, "live sizes", "count", "bytes");
        for (size_t i = 0; i < d->nhist; i++) {
            char le[OUT_NUM + 8], n[32];
            snprintf(le, sizeof le, "up to %s", out_bytes(d->hist[i].le, a));
            snprintf(n, sizeof n, "%" PRIu64, d->hist[i].count);
            out_table_row(&t, le, n, out_bytes(d->hist[i].bytes, b));
        }
        out_table_print(&t, f);
    }
}

/* whole: what the process had live (current_bytes), the base of the
 * percentages when --focus leaves only part of it. */
static int print_live(FILE *f, struct snapshot *s, const struct snap_groups *live,
                      const struct snap_allocator *al, uint64_t whole, unsigned top,
                      int indent)
{
    char a[OUT_NUM], of[OUT_NUM + 32] = "";
    bool focus = frame_filter_focus_text() != NULL;
    uint64_t count, bytes = groups_bytes(live, &count);
    bool at_exit = strcmp(s->reason, "exit") == 0;
    if (live->n == 0) {
        fprintf(f, "%*s%s: nothing%s\n", indent, "",
                at_exit ? "Live at exit" : "Live at this dump",
                focus ? " in focus" : at_exit ? " (no leaks)" : "");
        return 0;
    }
    /* A caching allocator keeps its segments to the end: only what its
     * tensors hold can be a leak, when it told us. */
    bool split = at_exit && al != NULL && al->present &&
                 al->allocated_bytes != SNAP_UNKNOWN && al->reserved_bytes != SNAP_UNKNOWN;
    if (focus) {
        char w[OUT_NUM];
        snprintf(of, sizeof of, " in focus, of %s", out_bytes(whole, w));
    }
    heading(f, "%*s%s: %s in %" PRIu64 " allocation%s%s", indent, "",
            !at_exit ? "Live at this dump"
            : split  ? "Live at exit"
                     : "Live at exit (possible leaks; no allocator said which is cache)",
            out_bytes(bytes, a), count, count == 1 ? "" : "s", of);
    if (split) {
        char t[OUT_NUM], c[OUT_NUM], text[256];
        uint64_t cache = al->reserved_bytes > al->allocated_bytes
                             ? al->reserved_bytes - al->allocated_bytes : 0;
        snprintf(text, sizeof text,
                 "PyTorch at exit: %s held by tensors (possible leaks), %s its cache "
                 "of freed blocks (not a leak)",
                 out_bytes(al->allocated_bytes, t), out_bytes(cache, c));
        char first[16];
        snprintf(first, sizeof first, "%*s", indent + 2, "");
        out_wrap(f, first, first, text);
        /* The tensors first: the segments' lines below are where the
         * cache grew, not who holds it now. */
        if (al->has_top) {
            char lead[32], rest[32];
            snprintf(lead, sizeof lead, "%*stensors:  ", indent + 2, "");
            snprintf(rest, sizeof rest, "%*s", indent + 12, "");
            report_allocator_tensors(f, s->ctx, al, lead, rest, 2);
            fprintf(f, "%*scached segments, by the line that created them:\n", indent + 2, "");
        }
    }
    return print_sites(f, s, live, focus ? whole : bytes, top, true, indent);
}

/* What PyTorch's tensors hold at the dump, by line: at exit the possible
 * leaks; its cache below them, which is none. */
static int print_live_tensors(FILE *f, struct snapshot *s, const struct holders *h,
                              unsigned top)
{
    bool at_exit = strcmp(s->reason, "exit") == 0;
    if (print_tensors(f, s, h, at_exit ? "Live at exit (possible leaks)" : "Live at this dump",
                      top) != 0)
        return -1;
    report_holders_cache(f, h, at_exit ? " (freed blocks kept for reuse, not a leak)" : NULL, 2);
    return 0;
}

/* "Call sites at peak (12.2 GiB)", with what --focus kept of it; for a
 * caching allocator (cached true) named for what its rows are. */
static int print_at_peak(FILE *f, struct snapshot *s, const struct snap_groups *g,
                         uint64_t peak, unsigned top, bool cached)
{
    char a[OUT_NUM], b[OUT_NUM];
    const char *what = cached ? "Cached segments at peak, by the line that created them"
                              : "Call sites at peak";
    if (frame_filter_focus_text() != NULL) {
        heading(f, "  %s (%s), in focus: %s", what, out_bytes(peak, a),
                out_bytes(groups_bytes(g, NULL), b));
    } else {
        if (g->n == 0)
            return 0;
        heading(f, "  %s (%s)", what, out_bytes(peak, a));
    }
    return g->n > 0 ? print_sites(f, s, g, peak, top, false, 2) : 0;
}

/* PyTorch's max_memory_allocated beside the peak, which is what it
 * reserved (the driver's view). */
static void print_tensor_peak(FILE *f, const struct snapshot *s, const struct snap_device *d)
{
    uint64_t p = report_allocator_peak(s, d);
    char a[OUT_NUM];
    if (p != SNAP_UNKNOWN)
        para(f, 2, "PyTorch's tensors peaked at %s (max_memory_allocated)", out_bytes(p, a));
}

static int print_device(FILE *f, struct snapshot *s, const struct snap_device *d,
                        unsigned top)
{
    char a[OUT_NUM], b[OUT_NUM], c[OUT_NUM], t[OUT_NUM];
    fputc('\n', f);
    heading(f, "Device %" PRId64 ": peak %s at %s, now %s", d->ordinal,
            out_bytes(d->peak_bytes, a), out_duration(d->peak_time_ns, t),
            out_bytes(d->current_bytes, b));
    char when[640];
    if (report_allocator_when(s, d->peak_phase, report_allocator_peak_step(s, d), when,
                              sizeof when)[0])
        para(f, 2, "the peak was reached during %s", when);
    char age[768];
    if (report_allocator_age(s, &d->allocator, age, sizeof age)[0])
        out_wrap(f, "  ", "  ", age);
    if (report_options.by_range || !holders_have_tensors(s, d, HOLDERS_PEAK) || holders_segments())
        print_tensor_peak(f, s, d);
    report_allocator_roles(f, &d->allocator, "  roles: ", "         ");
    if (d->total_bytes != SNAP_UNKNOWN || d->limit_bytes != SNAP_UNKNOWN) {
        char lim[OUT_NUM + 16] = "";
        if (d->limit_bytes != SNAP_UNKNOWN)
            snprintf(lim, sizeof lim, ", limit %s", out_bytes(d->limit_bytes, c));
        para(f, 2, "device total %s, free %s (last cuMemGetInfo)%s",
             out_bytes(d->total_bytes, a), out_bytes(d->free_bytes, b), lim);
    }
    print_kinds(f, d->by_kind);
    if (report_options.by_range) {
        if (report_phases(f, s, &d->by_phase, d->peak_bytes, top) != 0)
            return -1;
    } else {
        struct holders h;
        if (holders_get(s, d, HOLDERS_PEAK, false, &h) != 0)
            return -1;
        int rc = h.source == HOLDERS_TENSORS
                     ? print_tensors(f, s, &h, "At the peak", top)
                     : print_at_peak(f, s, &d->at_peak, d->peak_bytes, top,
                                     d->allocator.present);
        holders_free(&h);
        if (rc != 0)
            return -1;
        report_phases_hint(f, s, &d->by_phase);
    }
    struct holders now;
    if (holders_get(s, d, HOLDERS_NOW, false, &now) != 0)
        return -1;
    int rc = now.source == HOLDERS_TENSORS
                 ? print_live_tensors(f, s, &now, top)
                 : print_live(f, s, &d->live, &d->allocator, d->current_bytes, top, 2);
    holders_free(&now);
    if (rc != 0 || report_holders_growth(f, s, d, 2) != 0)
        return -1;
    if (report_churn(f, s, d, report_options.sort, top) != 0)
        return -1;
    print_frag(f, s, d);
    return 0;
}

static int print_host(FILE *f, struct snapshot *s, unsigned top)
{
    const struct snap_host *h = &s->host;
    if (!h->present || (h->stats.allocs == 0 && h->stats.peak_bytes == 0 &&
                        h->stats.failures == 0))
        return 0;
    char a[OUT_NUM], b[OUT_NUM], t[OUT_NUM];
    fputc('\n', f);
    heading(f, "Host pinned: peak %s at %s, now %s", out_bytes(h->stats.peak_bytes, a),
            out_duration(h->stats.peak_time_ns, t), out_bytes(h->stats.current_bytes, b));
    para(f, 2, "%" PRIu64 " alloc%s, %" PRIu64 " free%s, %" PRIu64 " failure%s",
         h->stats.allocs, out_plural(h->stats.allocs), h->stats.frees, out_plural(h->stats.frees),
         h->stats.failures, out_plural(h->stats.failures));
    if (report_options.by_range) {
        if (report_phases(f, s, &h->by_phase, h->stats.peak_bytes, top) != 0)
            return -1;
    } else if (print_at_peak(f, s, &h->at_peak, h->stats.peak_bytes, top, false) != 0) {
        return -1;
    }
    return print_live(f, s, &h->live, NULL, h->stats.current_bytes, top, 2);
}

static void print_counters(FILE *f, const struct snapshot *s)
{
    const struct snap_counters *c = &s->counters;
    char a[OUT_NUM];
    fputc('\n', f);
    para(f, 0, "Counters: %" PRIu64 " unknown free%s, %" PRIu64 " failed free%s, %" PRIu64
               " stack%s, %" PRIu64 " live allocation%s",
         c->unknown_frees, out_plural(c->unknown_frees), c->failed_frees,
         out_plural(c->failed_frees), c->stacks, out_plural(c->stacks), c->live_allocations,
         out_plural(c->live_allocations));
    if (c->wrong_kind_frees > 0)
        para(f, 2, "%" PRIu64 " free%s used the wrong API for a live allocation "
                   "(refused, the memory is still held): free pinned host memory "
                   "with cudaFreeHost/cuMemFreeHost, device memory with "
                   "cudaFree/cuMemFree", c->wrong_kind_frees,
             c->wrong_kind_frees == 1 ? "" : "s");
    if (c->reentrant_untracked > 0)
        para(f, 2, "%" PRIu64 " allocation/free call%s from a signal handler "
                   "interrupted cumemtrace's own bookkeeping and %s not tracked "
                   "(their later frees count as unknown): allocate outside "
                   "signal handlers", c->reentrant_untracked,
             c->reentrant_untracked == 1 ? "" : "s",
             c->reentrant_untracked == 1 ? "was" : "were");
    const struct snap_ooms *o = &s->ooms;
    if (o->suppressed > 0)
        para(f, 2, "%" PRIu64 " OOM post-mortem%s not written (CUMEMTRACE_MAX_OOM_DUMPS "
                   "reached)", o->suppressed, o->suppressed == 1 ? "" : "s");
    if (o->count > 0 || o->failed_attempts > 0) {
        /* retry_released_bytes counts the chains that recovered only, so it
         * is said of them: a failed chain's frees are in its post-mortem. */
        char rec[160];
        if (o->recovered == 0)
            snprintf(rec, sizeof rec, "none recovered");
        else
            snprintf(rec, sizeof rec, "%" PRIu64 " recovered, after the application "
                     "released %s in %s", o->recovered, out_bytes(o->retry_released_bytes, a),
                     o->recovered == 1 ? "its retries" : "their retries");
        para(f, 0, "OOMs: %" PRIu64 " chain%s (%" PRIu64 " failed attempt%s), %s",
             o->count, o->count == 1 ? "" : "s", o->failed_attempts,
             o->failed_attempts == 1 ? "" : "s", rec);
        for (size_t i = 0; i < o->ndumps; i++)
            para(f, 2, "post-mortem: %s", TEXT(s, o->dumps[i]));
    }
}

/* A post-mortem's devices without --full: one line each; the tables are
 * the holders above, again (the dump is taken at the failure). */
static void print_devices_brief(FILE *f, const struct snapshot *s)
{
    char a[OUT_NUM], b[OUT_NUM], t[OUT_NUM], line[256];
    static const char hint[] = " (report --full: every table)";
    fputc('\n', f);
    for (size_t i = 0; i < s->ndevices; i++) {
        const struct snap_device *d = &s->devices[i];
        snprintf(line, sizeof line, "Device %" PRId64 ": peak %s at %s, now %s", d->ordinal,
                 out_bytes(d->peak_bytes, a), out_duration(d->peak_time_ns, t),
                 out_bytes(d->current_bytes, b));
        bool last = i + 1 == s->ndevices && s->ooms.count <= 1;
        if (last && out_width(line) + sizeof hint - 1 <= OUT_WIDTH)
            fprintf(f, "%s%s\n", line, hint);
        else
            para(f, 0, "%s%s", line, last ? hint : "");
        print_tensor_peak(f, s, d);
    }
    const struct snap_ooms *o = &s->ooms;
    if (o->count > 1) {
        char rec[32] = "none recovered";
        if (o->recovered > 0)
            snprintf(rec, sizeof rec, "%" PRIu64 " recovered", o->recovered);
        para(f, 0, "OOMs: %" PRIu64 " chains (%" PRIu64 " failed attempt%s), %s%s", o->count,
             o->failed_attempts, o->failed_attempts == 1 ? "" : "s", rec, hint);
    }
    if (s->ndevices == 0 && o->count <= 1)
        para(f, 0, "%s", hint + 1);
}

static int print_one(FILE *f, struct snapshot *s, unsigned top)
{
    print_header(f, s);
    if (s->oom.present) {
        if (print_oom(f, s, top) != 0 || print_advice(f, s) != 0)
            return -1;
        if (!report_options.full) {
            print_devices_brief(f, s);
            return 0;
        }
    }
    for (size_t i = 0; i < s->ndevices; i++)
        if (print_device(f, s, &s->devices[i], top) != 0)
            return -1;
    if (s->ndevices == 0)
        fprintf(f, "\nNo device saw tracked activity.\n");
    if (print_host(f, s, top) != 0)
        return -1;
    print_counters(f, s);
    if (!s->oom.present && print_advice(f, s) != 0)
        return -1;
    return 0;
}

int report_text(FILE *f, struct snapshot **s, size_t n, unsigned top)
{
    if (n == 0)
        return 0;
    /* Several ranks have their own view (ranks_report.c). */
    return print_one(f, s[report_pick(s, n)], top);
}
