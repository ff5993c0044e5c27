/* html_model.c - the JSON model the HTML page draws (see html.h).
 *
 * Shape (every array is compact: column lists are in the model itself):
 *   {kind, generator, frames: [[display, type, name, named]], type 0 native,
 *    files: [file...]}                                       1 python, 2 marker
 *   file: {file, exe, pid, rank, host, reason, recovered, cmdline, dump_ns,
 *          thinned, frame_width, stack_entries, stack_entry: [...],
 *          stack_len: [...], stack_frames: "..."  (see write_stacks),
 *          labels, sites: {label, stack, at_peak, ...: [one per site]}
 *                                           largest at peak first,
 *          tensor_model (the rows, groups and bands are PyTorch's tensors:
 *                     html_tview, html.h),
 *          devices: [{name, ordinal, total, free, limit, current, peak,
 *                     peak_ns, end_ns, groups: {peak, live, oom},
 *                     groups_tensors: {peak, live, oom} (which are tensors),
 *                     bands: [site...], points: [[t, total, band...]]}],
 *          ranges (html_phases.c), oom, attempts, advice}
 * A group row is [stack, bytes, count], stack -1 for none.  The per-site
 * timeline split is rebuilt from the deltas of the event log, which is only
 * right when nothing was thinned: a thinned log gives bands: [] and the
 * page draws the exact total alone, saying why.  With the tensor model the
 * bands are lines, their values PyTorch's readings (html_tview_bands).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "oom_causes.h"
#include "oom_text.h"
#include "cli.h"
#include "arena.h"
#include "frames.h"
#include "hmap.h"
#include "holders.h"
#include "html.h"
#include "out.h"
#include "report_allocator.h"

#define NO_SITE UINT32_MAX

struct site_row {
    uint32_t stack; /* a representative stack index, or SNAP_NO_STACK */
    const char *label; /* tensors: the holder's name; NULL: the stack's site */
    uint64_t at_peak, live, oom, allocs, frees, alloc_bytes;
    uint8_t kinds;
};

struct model {
    struct snapshot *s;
    uint32_t *local;      /* site id (BY_STACK) -> row index, NO_SITE */
    size_t nlocal;
    uint32_t *stack_row;  /* stack index -> row index */
    uint32_t nostack_row; /* the row of "[no stack]", NO_SITE until needed */
    struct site_row *rows;
    size_t nrows, rows_cap;
    bool counted;         /* allocs/frees come from an unthinned log */
    uint32_t *pos;        /* row index -> position in the sorted table */
    struct html_tview tv; /* PyTorch's tensors, when tv.on the rows' model */
};

static uint32_t row_of(struct model *m, uint32_t stack)
{
    if (stack != SNAP_NO_STACK && m->stack_row[stack] != NO_SITE)
        return m->stack_row[stack];
    if (stack == SNAP_NO_STACK && m->nostack_row != NO_SITE)
        return m->nostack_row;
    uint32_t id = frames_site(m->s, stack, BY_STACK);
    if (id == FRAMES_NONE)
        return NO_SITE;
    if (id >= m->nlocal) {
        size_t n = m->nlocal ? m->nlocal : 64;
        while (n <= id)
            n *= 2;
        uint32_t *l = realloc(m->local, n * sizeof *l);
        if (l == NULL)
            return NO_SITE;
        for (size_t i = m->nlocal; i < n; i++)
            l[i] = NO_SITE;
        m->local = l;
        m->nlocal = n;
    }
    uint32_t r = m->local[id];
    if (r == NO_SITE) {
        if (snapshot_vec_reserve((void **)&m->rows, &m->rows_cap, sizeof *m->rows,
                                 m->nrows + 1))
            return NO_SITE;
        r = (uint32_t)m->nrows++;
        m->rows[r] = (struct site_row){.stack = stack};
        m->local[id] = r;
    }
    if (stack == SNAP_NO_STACK)
        m->nostack_row = r;
    else
        m->stack_row[stack] = r;
    return r;
}

/* Sums groups into the rows; which selects the column. */
static int add_groups(struct model *m, const struct snap_groups *g, int which)
{
    for (size_t i = 0; i < g->n; i++) {
        uint32_t r = row_of(m, g->v[i].stack);
        if (r == NO_SITE)
            return -1;
        struct site_row *row = &m->rows[r];
        uint64_t *col = which == 0 ? &row->at_peak : which == 1 ? &row->live : &row->oom;
        *col = html_sat_add(*col, g->v[i].bytes);
        if (g->v[i].kind < 8)
            row->kinds |= (uint8_t)(1u << g->v[i].kind);
    }
    return 0;
}

static uint32_t event_row(struct model *m, const struct snap_event *e)
{
    uint32_t st = e->stack_id > 0 ? snapshot_stack_index(m->s, e->stack_id) : SNAP_NO_STACK;
    return row_of(m, st);
}

static int model_build(struct model *m, struct snapshot *s)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    m->nostack_row = NO_SITE;
    if (html_tview_build(&m->tv, s) != 0)
        return -1;
    m->stack_row = malloc((s->nstacks ? s->nstacks : 1) * sizeof *m->stack_row);
    if (m->stack_row == NULL)
        return -1;
    for (size_t i = 0; i < s->nstacks; i++)
        m->stack_row[i] = NO_SITE;
    if (m->tv.on) { /* no counts: the event log has the driver's calls */
        if (m->tv.nlines > 0 && (m->rows = malloc(m->tv.nlines * sizeof *m->rows)) == NULL)
            return -1;
        for (size_t i = 0; i < m->tv.nlines; i++) {
            const struct html_tline *l = &m->tv.lines[i];
            m->rows[i] = (struct site_row){.stack = l->stack, .label = l->label,
                                           .at_peak = l->bytes[HTML_FLAME_PEAK],
                                           .live = l->bytes[HTML_FLAME_LIVE],
                                           .oom = l->bytes[HTML_FLAME_OOM],
                                           .kinds = 1u << KIND_DEVICE};
        }
        m->nrows = m->rows_cap = m->tv.nlines;
        return 0;
    }
    for (size_t d = 0; d < s->ndevices; d++)
        if (add_groups(m, &s->devices[d].at_peak, 0) || add_groups(m, &s->devices[d].live, 1))
            return -1;
    if (s->host.present &&
        (add_groups(m, &s->host.at_peak, 0) || add_groups(m, &s->host.live, 1)))
        return -1;
    if (s->oom.present && add_groups(m, &s->oom.live, 2))
        return -1;
    m->counted = s->events.thinned == 0 && s->events.stride <= 1;
    for (size_t i = 0; m->counted && i < s->events.n; i++) {
        const struct snap_event *e = &s->events.v[i];
        if (e->unfocused) /* --focus left its call site out */
            continue;
        uint32_t r = event_row(m, e);
        if (r == NO_SITE)
            return -1;
        if (e->delta > 0) {
            m->rows[r].allocs++;
            m->rows[r].alloc_bytes = html_sat_add(m->rows[r].alloc_bytes, (uint64_t)e->delta);
        } else if (e->delta < 0) {
            m->rows[r].frees++;
        }
    }
    return 0;
}

static void model_free(struct model *m)
{
    html_tview_free(&m->tv);
    free(m->local);
    free(m->stack_row);
    free(m->rows);
    free(m->pos);
}

/* ---- sorting rows: at peak, then live, then allocated, then stack ---- */

static const struct site_row *sort_rows;

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
    return a < b ? 1 : a > b ? -1 : 0;
}

static int cmp_rows(const void *pa, const void *pb)
{
    const struct site_row *a = &sort_rows[*(const uint32_t *)pa];
    const struct site_row *b = &sort_rows[*(const uint32_t *)pb];
    int c = cmp_u64_desc(a->at_peak, b->at_peak);
    if (c == 0)
        c = cmp_u64_desc(a->live, b->live);
    if (c == 0)
        c = cmp_u64_desc(a->alloc_bytes, b->alloc_bytes);
    if (c == 0)
        c = a->stack < b->stack ? -1 : a->stack > b->stack;
    return c;
}

/* ---- writing ---- */

static void write_groups(struct json_out *w, const struct snap_groups *g)
{
    json_out_begin_array(w);
    for (size_t i = 0; i < g->n; i++) {
        json_out_begin_array(w);
        html_stack_ref(w, g->v[i].stack);
        json_out_u64(w, g->v[i].bytes);
        json_out_u64(w, g->v[i].count);
        json_out_end_array(w);
    }
    json_out_end_array(w);
}

/* A member key: an array of the strings v[0..n). */
static void write_strings(struct json_out *w, const char *key, const char *const *v, size_t n)
{
    json_out_key(w, key);
    json_out_begin_array(w);
    for (size_t i = 0; i < n; i++)
        json_out_string(w, v[i]);
    json_out_end_array(w);
}

/* One column of the site table: a JSON array of one number per row. */
enum site_col { COL_STACK, COL_AT_PEAK, COL_LIVE, COL_OOM, COL_ALLOCS, COL_FREES,
                COL_ALLOC_BYTES, COL_KINDS };

static void write_site_column(struct json_out *w, struct model *m, const uint32_t *order,
                              enum site_col c)
{
    json_out_begin_array(w);
    for (size_t i = 0; i < m->nrows; i++) {
        const struct site_row *r = &m->rows[order[i]];
        switch (c) {
        case COL_STACK: html_stack_ref(w, r->stack); break;
        case COL_AT_PEAK: json_out_u64(w, r->at_peak); break;
        case COL_LIVE: json_out_u64(w, r->live); break;
        case COL_OOM: json_out_u64(w, r->oom); break;
        case COL_ALLOCS: json_out_u64(w, r->allocs); break;
        case COL_FREES: json_out_u64(w, r->frees); break;
        case COL_ALLOC_BYTES: json_out_u64(w, r->alloc_bytes); break;
        case COL_KINDS: json_out_u64(w, r->kinds); break; /* bit per enum snap_kind */
        }
    }
    json_out_end_array(w);
}

/* The site table by column, labels as indices into "labels" (as text
 * views print them, a Python file by its basename): for 100 000 sites a
 * tenth of the objects to parse that rows of ten values would make. */
static int write_sites(struct json_out *w, struct model *m, const uint32_t *order)
{
    write_strings(w, "kind_names", snapshot_kind_names, KIND_COUNT);
    json_out_key_bool(w, "counted", m->counted);
    struct arena a;
    struct hmap map;
    arena_init(&a);
    hmap_init(&map, &a);
    const char **labels = NULL;
    uint32_t *label_of = malloc((m->nrows ? m->nrows : 1) * sizeof *label_of);
    size_t nlabels = 0, cap = 0;
    int rc = label_of ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < m->nrows; i++) {
        const char *l = m->rows[order[i]].label;
        if (l == NULL) {
            uint32_t id = frames_site(m->s, m->rows[order[i]].stack, BY_STACK);
            l = id == FRAMES_NONE ? "[no stack]"
                                  : frames_site_get(m->s->ctx, BY_STACK, id)->display;
        }
        uint32_t v;
        if (hmap_get_or_add(&map, l, strlen(l), (uint32_t)nlabels, &v, NULL) ||
            (v == nlabels &&
             snapshot_vec_reserve((void **)&labels, &cap, sizeof *labels, nlabels + 1))) {
            rc = -1;
            break;
        }
        if (v == nlabels)
            labels[nlabels++] = l;
        label_of[i] = v;
    }
    if (rc == 0) {
        write_strings(w, "labels", labels, nlabels);
        json_out_key(w, "sites");
        json_out_begin_object(w);
        json_out_key(w, "label");
        json_out_begin_array(w);
        for (size_t i = 0; i < m->nrows; i++)
            json_out_u64(w, label_of[i]);
        json_out_end_array(w);
        static const char *const names[] = {"stack", "at_peak", "live", "oom", "allocs",
                                            "frees", "alloc_bytes", "kinds"};
        for (int c = COL_STACK; c <= COL_KINDS; c++) {
            json_out_key(w, names[c]);
            /* counts from a thinned log are unknown: no column; nor the
             * tensors of a moment no device has them at */
            if ((!m->counted && (c == COL_ALLOCS || c == COL_FREES || c == COL_ALLOC_BYTES)) ||
                (m->tv.on && c >= COL_AT_PEAK && c <= COL_OOM && !m->tv.known[c - COL_AT_PEAK]))
                json_out_null(w);
            else
                write_site_column(w, m, order, (enum site_col)c);
        }
        json_out_end_object(w);
    }
    free(label_of);
    free(labels);
    hmap_free(&map);
    arena_free(&a);
    return rc;
}

struct track {
    const char *name;
    int64_t device; /* -1 pinned host */
    uint64_t total, free, limit, current, peak;
    int64_t peak_ns;
    const struct snap_groups *peak_g, *live_g;
    const struct snap_allocator *al; /* the caching allocator's, or NULL */
    uint64_t peak_allocated;         /* its max_memory_allocated, or unknown */
    const char *figures_age;         /* report's sentence on their age, or NULL */
    size_t index;                    /* in s->devices; SIZE_MAX pinned host */
};

static void point(struct json_out *w, int64_t t, uint64_t total, const int64_t *band, size_t nb)
{
    json_out_begin_array(w);
    json_out_i64(w, t);
    json_out_u64(w, total);
    for (size_t b = 0; b < nb; b++)
        json_out_i64(w, band[b]);
    json_out_end_array(w);
}

/* A slice's lowest and highest points lo and hi ([t, total, bands...]),
 * in time order, once when they are one. */
static void slice_points(struct json_out *w, const int64_t *lo, const int64_t *hi, size_t nb)
{
    const int64_t *a = lo[0] <= hi[0] ? lo : hi, *b = a == lo ? hi : lo;
    point(w, a[0], (uint64_t)a[1], a + 2, nb);
    if (b[0] != a[0])
        point(w, b[0], (uint64_t)b[1], b + 2, nb);
}

/* The track's points: every event, or per time slice the lowest and the
 * highest total (in time order) when there are too many to draw. */
static int write_points(struct json_out *w, struct model *m, const struct track *t,
                        const uint32_t *band_of_row, size_t nb, int64_t end,
                        const struct html_reading *rd, size_t nrd)
{
    const struct snap_events *ev = &m->s->events;
    size_t nev = 0;
    for (size_t i = 0; i < ev->n; i++)
        nev += ev->v[i].device == t->device;
    bool all = nev <= 2 * HTML_SLICES;
    /* cur: the bands now; lo, hi: [t, total, bands...] of the slice's
     * lowest and highest total. */
    int64_t *cur = calloc(3 * nb + 4, sizeof *cur);
    if (cur == NULL)
        return -1;
    int64_t *lo = cur + nb, *hi = lo + nb + 2;
    bool have = false;
    int64_t slice = -1;
    size_t ri = 0;
    uint64_t total = 0;
    json_out_begin_array(w);
    point(w, 0, 0, cur, nb);
    for (size_t i = 0; i < ev->n; i++) {
        const struct snap_event *e = &ev->v[i];
        if (e->device != t->device)
            continue;
        /* the tensors' bands hold each reading's bytes until the next */
        for (; ri < nrd && rd[ri].t_ns <= e->t_ns; ri++) {
            memcpy(cur, rd[ri].v, nb * sizeof *cur);
            if (all)
                point(w, rd[ri].t_ns, total, cur, nb);
        }
        total = e->current;
        if (rd == NULL && nb > 0 && !e->unfocused) {
            uint32_t r = event_row(m, e);
            if (r == NO_SITE) {
                free(cur);
                return -1;
            }
            if (band_of_row[r] != NO_SITE)
                cur[band_of_row[r]] += e->delta;
        }
        if (all) {
            point(w, e->t_ns, e->current, cur, nb);
            continue;
        }
        int64_t sl = (int64_t)((double)e->t_ns / (double)end * HTML_SLICES);
        if (sl != slice && have) {
            slice_points(w, lo, hi, nb);
            have = false;
        }
        slice = sl;
        int64_t tot = e->current > INT64_MAX ? INT64_MAX : (int64_t)e->current;
        if (!have || tot < lo[1]) {
            lo[0] = e->t_ns, lo[1] = tot;
            memcpy(lo + 2, cur, nb * sizeof *cur);
        }
        if (!have || tot > hi[1]) {
            hi[0] = e->t_ns, hi[1] = tot;
            memcpy(hi + 2, cur, nb * sizeof *cur);
        }
        have = true;
    }
    if (have)
        slice_points(w, lo, hi, nb);
    for (; ri < nrd && rd[ri].t_ns <= end; ri++) {
        memcpy(cur, rd[ri].v, nb * sizeof *cur);
        point(w, rd[ri].t_ns, total, cur, nb);
    }
    point(w, end, t->current, cur, nb);
    json_out_end_array(w);
    free(cur);
    return 0;
}

static int64_t log_end(const struct snapshot *s)
{
    int64_t end = s->process.dump_time_ns != SNAP_UNKNOWN_I64 ? s->process.dump_time_ns : 0;
    if (s->events.n > 0 && s->events.v[s->events.n - 1].t_ns > end)
        end = s->events.v[s->events.n - 1].t_ns;
    return end > 0 ? end : 1;
}

/* The rows of the tensor model at one moment: [stack, bytes, count]. */
static void write_trows(struct json_out *w, const struct html_tmode *tm)
{
    json_out_begin_array(w);
    for (size_t i = 0; i < tm->n; i++) {
        json_out_begin_array(w);
        json_out_u64(w, tm->v[i].stack);
        json_out_u64(w, tm->v[i].bytes);
        json_out_u64(w, tm->v[i].count);
        json_out_end_array(w);
    }
    json_out_end_array(w);
}

static int write_track(struct json_out *w, struct model *m, const struct track *t)
{
    struct snapshot *s = m->s;
    const struct html_tmode *tm =
        m->tv.on && t->index < m->tv.ndev ? m->tv.dev[t->index] : NULL;
    /* Bands: the track's biggest call sites at its peak (live when it never
     * peaked above zero); in a PyTorch process its biggest lines. */
    const struct snap_groups *g = t->peak_g->n ? t->peak_g : t->live_g;
    uint32_t bands[HTML_BANDS];
    size_t nb = 0, nrd = 0;
    uint32_t *band_of_row = NULL;
    struct html_reading *rd = NULL;
    bool split = m->counted;
    if (tm != NULL && html_tview_bands(&m->tv, s, t->index, bands, &nb, &rd, &nrd) != 0)
        return -1;
    if (tm != NULL && rd == NULL)
        nb = 0; /* no reading on the log's clock: the total alone */
    if (split) {
        band_of_row = malloc((m->nrows ? m->nrows : 1) * sizeof *band_of_row);
        if (band_of_row == NULL)
            return -1;
        for (size_t i = 0; i < m->nrows; i++)
            band_of_row[i] = NO_SITE;
        /* Groups are largest first; several groups may be one site. */
        for (size_t i = 0; i < g->n && nb < HTML_BANDS; i++) {
            uint32_t r = row_of(m, g->v[i].stack);
            if (r == NO_SITE) {
                free(band_of_row);
                return -1;
            }
            if (band_of_row[r] == NO_SITE) {
                band_of_row[r] = (uint32_t)nb;
                bands[nb++] = r;
            }
        }
    }
    json_out_begin_object(w);
    json_out_key_string(w, "name", t->name);
    json_out_key_i64(w, "ordinal", t->device);
    json_out_key_u64(w, "total", t->total);
    json_out_key_u64(w, "free", t->free);
    json_out_key_u64(w, "limit", t->limit);
    json_out_key_u64(w, "current", t->current);
    json_out_key_u64(w, "peak", t->peak);
    json_out_key_i64(w, "peak_ns", t->peak_ns);
    html_tensors_write(w, t->al, t->peak_allocated);
    if (t->device >= 0 && html_holders_write(w, s, snapshot_device(s, t->device)) != 0) {
        free(band_of_row);
        html_readings_free(rd, nrd);
        return -1;
    }
    json_out_key_string(w, "figures_age", t->figures_age);
    int64_t end = log_end(s);
    json_out_key_i64(w, "end_ns", end);
    /* each moment PyTorch's tensors where the file has them, else the
     * driver's groups; groups_tensors says which */
    static const char *const mk[] = {"peak", "live", "oom"};
    const struct snap_groups *dg[] = {t->peak_g, t->live_g, &s->oom.live};
    int nmodes = s->oom.present && s->oom.device == t->device ? 3 : 2;
    json_out_key(w, "groups");
    json_out_begin_object(w);
    for (int md = 0; md < nmodes; md++) {
        json_out_key(w, mk[md]);
        if (tm != NULL && tm[md].has)
            write_trows(w, &tm[md]);
        else
            write_groups(w, dg[md]);
    }
    json_out_end_object(w);
    json_out_key(w, "groups_tensors");
    json_out_begin_object(w);
    for (int md = 0; md < nmodes; md++)
        json_out_key_bool(w, mk[md], tm != NULL && tm[md].has);
    json_out_end_object(w);
    json_out_key(w, "bands");
    json_out_begin_array(w);
    for (size_t b = 0; b < nb; b++)
        json_out_u64(w, m->pos[bands[b]]);
    json_out_end_array(w);
    json_out_key(w, "points");
    int rc = write_points(w, m, t, band_of_row, nb, end, rd, nrd);
    json_out_end_object(w);
    free(band_of_row);
    html_readings_free(rd, nrd);
    return rc;
}

/* 0, or -1 when out of memory. */
static int write_oom(struct json_out *w, struct snapshot *s)
{
    const struct snap_oom *o = &s->oom;
    json_out_key(w, "oom");
    if (!snapshot_is_oom(s)) {
        json_out_null(w);
        return 0;
    }
    /* the first sentence: what failed, and its cause, as report words them */
    char text[1600], what[512], why[1024];
    snprintf(text, sizeof text, "%s: %s.", oom_causes_failure(s, what, sizeof what),
             oom_causes_line(s, why, sizeof why));
    json_out_begin_object(w);
    json_out_key_string(w, "sentence", text);
    json_out_key_string(w, "cause", snapshot_cause_name(o));
    json_out_key_string(w, "entry", o->entry_point);
    json_out_key_string(w, "kind", snapshot_kind_name(o->kind));
    json_out_key_i64(w, "device", o->device);
    json_out_key(w, "stack");
    html_stack_ref(w, o->stack);
    static const char *const keys[] = {"requested", "total", "free", "limit", "tracked",
                                       "untracked", "shortfall", "attempts", "released",
                                       "released_count"};
    const uint64_t vals[] = {o->requested_bytes, o->total_bytes, o->free_bytes,
                             o->limit_bytes, o->tracked_bytes, o->untracked_bytes,
                             o->shortfall_bytes, o->attempts, o->released_bytes,
                             o->released_count};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        json_out_key_u64(w, keys[i], vals[i]);
    json_out_key_i64(w, "time_ns", o->time_ns);
    json_out_key(w, "recovered");
    json_out_tribool(w, o->recovered);
    json_out_key_u64s(w, "by_kind", true, snapshot_kind_names, o->by_kind, DEVICE_KINDS);
    json_out_key(w, "live");
    write_groups(w, &o->live);
    html_layout_write(w, o);
    const struct snap_allocator *al = &o->allocator;
    json_out_key(w, "allocator");
    if (!al->present) {
        json_out_null(w);
    } else {
        char sent[512];
        json_out_begin_object(w);
        json_out_key_string(w, "name", al->name);
        json_out_key_string(w, "sentence", oom_causes_allocator(o, sent, sizeof sent));
        char node[1024];
        json_out_key_string(w, "origin",
                            oom_text_origin(s, node, sizeof node)[0] ? node : NULL);
        static const char *const ak[] = {"requested", "allocated", "reserved", "unallocated",
                                         "largest_free_small", "largest_free_large", "limit",
                                         "segments"};
        const uint64_t av[] = {al->requested_bytes, al->allocated_bytes, al->reserved_bytes,
                               al->reserved_unallocated_bytes, al->largest_free_small,
                               al->largest_free_large, al->limit_bytes, al->segments};
        for (size_t i = 0; i < sizeof ak / sizeof ak[0]; i++)
            json_out_key_u64(w, ak[i], av[i]);
        html_tensors_write(w, al, al->peak_allocated_bytes);
        if (html_holders_write(w, s, NULL) != 0)
            return -1;
        json_out_end_object(w);
    }
    json_out_end_object(w);
    return 0;
}

static void write_meta(struct json_out *w, const struct snapshot *s)
{
    json_out_key_string(w, "file", s->file);
    json_out_key_string(w, "exe", s->process.exe);
    json_out_key_i64(w, "pid", s->process.pid);
    json_out_key_i64(w, "rank", s->process.rank);
    json_out_key_string(w, "host", s->process.host);
    json_out_key_string(w, "reason", s->reason);
    json_out_key_string(w, "recovered", s->recovered); /* null unless read from a stream */
    json_out_key_string(w, "tool_version", s->process.tool_version);
    write_strings(w, "cmdline", s->process.cmdline, s->process.ncmdline);
    json_out_key_i64(w, "dump_ns", s->process.dump_time_ns);
    json_out_key_bool(w, "thinned", !(s->events.thinned == 0 && s->events.stride <= 1));
    json_out_key_u64(w, "events_recorded", s->events.recorded);
    json_out_key_u64(w, "events_kept", s->events.n);
}

/* Stacks by column: stack_entry (an index into stack_entries, the CUDA
 * entry points), stack_len (frames per stack) and stack_frames, one string
 * of every stack's frame indices in turn, innermost first, each in
 * frame_width base-64 digits (A-Z a-z 0-9 + /): for a 100 000-stack file a
 * third of the size of arrays of numbers, and three values to parse
 * instead of 300 000. */
static int write_stacks(struct json_out *w, const struct snapshot *s,
                        const struct html_tview *tv, uint32_t **entry_out)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned width = 1;
    for (uint64_t span = 64; span <= s->ctx->nframes && width < 6; span *= 64)
        width++;
    json_out_key_u64(w, "frame_width", width);
    /* entry points: few distinct ones, told apart by their interned text;
     * the tensor model's stacks (past the file's) have "", none */
    size_t nall = s->nstacks + tv->nstacks;
    const char **entries = NULL;
    size_t nentries = 0, cap = 0, total = 0;
    uint32_t *entry_of = malloc((nall ? nall : 1) * sizeof *entry_of);
    if (entry_of == NULL)
        return -1;
    for (size_t i = 0; i < nall; i++) {
        const char *e = i >= s->nstacks ? "" : s->stacks[i].entry ? s->stacks[i].entry : "unknown";
        size_t k;
        for (k = 0; k < nentries && strcmp(entries[k], e) != 0; k++)
            ;
        if (k == nentries) {
            if (snapshot_vec_reserve((void **)&entries, &cap, sizeof *entries, nentries + 1)) {
                free(entries);
                free(entry_of);
                return -1;
            }
            entries[nentries++] = e;
        }
        entry_of[i] = (uint32_t)k;
        total += i < s->nstacks ? s->stacks[i].nframes : tv->stacks[i - s->nstacks].nframes;
    }
    write_strings(w, "stack_entries", entries, nentries);
    json_out_key(w, "stack_entry");
    json_out_begin_array(w);
    for (size_t i = 0; i < nall; i++)
        json_out_u64(w, entry_of[i]);
    json_out_end_array(w);
    json_out_key(w, "stack_len");
    json_out_begin_array(w);
    for (size_t i = 0; i < nall; i++)
        json_out_u64(w, i < s->nstacks ? s->stacks[i].nframes
                                       : tv->stacks[i - s->nstacks].nframes);
    json_out_end_array(w);
    free(entries);
    *entry_out = entry_of; /* the caller's: html_flame_nodes tells entries apart by it */
    char *buf = malloc(total * width + 1);
    if (buf == NULL)
        return -1;
    char *p = buf;
    for (size_t i = 0; i < nall; i++) {
        const uint32_t *fr = i < s->nstacks ? s->stacks[i].frames
                                            : html_tstack_frames(&tv->stacks[i - s->nstacks]);
        uint32_t n = i < s->nstacks ? s->stacks[i].nframes : tv->stacks[i - s->nstacks].nframes;
        for (uint32_t f = 0; f < n; f++)
            for (unsigned d = width; d > 0; d--)
                *p++ = digits[(fr[f] >> (6 * (d - 1))) & 63];
    }
    *p = '\0';
    json_out_key_string(w, "stack_frames", buf);
    free(buf);
    return 0;
}

static int write_file(struct json_out *w, struct snapshot *s)
{
    struct model m;
    uint32_t *order = NULL, *entry_of = NULL;
    struct advice *adv = NULL;
    int rc = -1;
    if (model_build(&m, s) != 0)
        goto out;
    order = malloc((m.nrows ? m.nrows : 1) * sizeof *order);
    adv = malloc(ADVICE_MAX * sizeof *adv);
    if (order == NULL || adv == NULL)
        goto out;
    for (size_t i = 0; i < m.nrows; i++)
        order[i] = (uint32_t)i;
    sort_rows = m.rows;
    qsort(order, m.nrows, sizeof *order, cmp_rows);
    m.pos = malloc((m.nrows ? m.nrows : 1) * sizeof *m.pos);
    if (m.pos == NULL)
        goto out;
    for (size_t i = 0; i < m.nrows; i++)
        m.pos[order[i]] = (uint32_t)i;
    json_out_begin_object(w);
    write_meta(w, s);
    json_out_key_bool(w, "tensor_model", m.tv.on);
    if (write_stacks(w, s, &m.tv, &entry_of) != 0)
        goto out;
    if (write_sites(w, &m, order) != 0)
        goto out;
    /* the page builds its flame graph lazily and cannot count it */
    json_out_key(w, "flame_nodes");
    json_out_begin_object(w);
    static const char *const modes[] = {"peak", "live", "oom"};
    for (int md = HTML_FLAME_PEAK; md <= HTML_FLAME_OOM; md++) {
        uint64_t nn;
        if (md == HTML_FLAME_OOM && !s->oom.present)
            continue;
        if (html_flame_nodes(s, &m.tv, entry_of, md, &nn) != 0)
            goto out;
        json_out_key_u64(w, modes[md], nn);
    }
    json_out_end_object(w);
    json_out_key(w, "stack_site");
    json_out_begin_array(w);
    for (size_t i = 0; i < s->nstacks; i++) {
        uint32_t r = m.stack_row[i];
        if (r == NO_SITE) {
            /* A stack nothing refers to: no row, hence no table position. */
            json_out_i64(w, -1);
            continue;
        }
        json_out_u64(w, m.pos[r]);
    }
    json_out_end_array(w);
    json_out_key(w, "devices");
    json_out_begin_array(w);
    char names[64], age[768];
    for (size_t d = 0; d < s->ndevices; d++) {
        const struct snap_device *dv = &s->devices[d];
        snprintf(names, sizeof names, "device %" PRId64, dv->ordinal);
        /* as `report` says it: PyTorch's figures older than the snapshot, or missing */
        report_allocator_age(s, &dv->allocator, age, sizeof age);
        struct track t = {names, dv->ordinal, dv->total_bytes, dv->free_bytes,
                          dv->limit_bytes, dv->current_bytes, dv->peak_bytes,
                          dv->peak_time_ns, &dv->at_peak, &dv->live, &dv->allocator,
                          report_allocator_peak(s, dv), age[0] ? age : NULL, d};
        if (write_track(w, &m, &t) != 0)
            goto out;
    }
    if (s->host.present && s->host.stats.peak_bytes > 0) {
        struct track t = {"host pinned", -1, SNAP_UNKNOWN, SNAP_UNKNOWN, SNAP_UNKNOWN,
                          s->host.stats.current_bytes, s->host.stats.peak_bytes,
                          s->host.stats.peak_time_ns, &s->host.at_peak, &s->host.live,
                          NULL, SNAP_UNKNOWN, NULL, SIZE_MAX};
        if (write_track(w, &m, &t) != 0)
            goto out;
    }
    json_out_end_array(w);
    html_phases_write(w, s);
    html_roles_write(w, s);
    if (write_oom(w, s) != 0)
        goto out;
    json_out_key(w, "attempts");
    json_out_begin_array(w);
    for (size_t i = 0; i < s->ooms.nattempts; i++) {
        const struct snap_attempt *a = &s->ooms.attempts[i];
        json_out_begin_array(w);
        json_out_i64(w, a->t_ns);
        json_out_i64(w, a->device);
        json_out_u64(w, a->requested_bytes);
        json_out_u64(w, a->chain);
        json_out_u64(w, a->attempt);
        json_out_string(w, a->outcome);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    int na = advice_compute(s, adv);
    if (na < 0)
        goto out;
    json_out_key(w, "advice");
    json_out_begin_array(w);
    for (int i = 0; i < na; i++) {
        json_out_begin_array(w);
        json_out_string(w, adv[i].id);
        json_out_string(w, adv[i].text);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
    rc = 0;
out:
    free(adv);
    free(order);
    free(entry_of);
    model_free(&m);
    return rc;
}

int html_model_write(struct json_out *w, struct snapshot **s, size_t n, const char *kind)
{
    json_out_begin_object(w);
    json_out_key_string(w, "kind", kind);
    json_out_key_string(w, "generator", "cumemtrace " CUMEMTRACE_CLI_VERSION);
    json_out_key(w, "files");
    json_out_begin_array(w);
    for (size_t i = 0; i < n; i++)
        if (write_file(w, s[i]) != 0)
            return -1;
    json_out_end_array(w);
    /* Frames last: writing the files may have interned no new ones, but
     * the table is the context's, shared by every file. */
    const struct snapctx *ctx = s[0]->ctx;
    json_out_key(w, "frames");
    json_out_begin_array(w);
    for (size_t i = 0; i < ctx->nframes; i++) {
        const struct frame *fr = &ctx->frames[i];
        json_out_begin_array(w);
        json_out_string(w, fr->display);
        json_out_u64(w, fr->type);
        json_out_string(w, fr->name);
        json_out_u64(w, fr->named);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
    return 0;
}
