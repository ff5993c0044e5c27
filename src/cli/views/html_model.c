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
 *          devices: [{name, ordinal, total, free, limit, current, peak,
 *                     peak_ns, end_ns, groups: {peak, live, oom},
 *                     bands: [site...], points: [[t, total, band...]]}],
 *          ranges (html_phases.c), oom, attempts, advice}
 * A group row is [stack, bytes, count], stack -1 for none.  The per-site
 * timeline split is rebuilt from the deltas of the event log, which is only
 * right when nothing was thinned: a thinned log gives bands: [] and the
 * page draws the exact total alone, saying why.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "oom_text.h"
#include "cli.h"
#include "arena.h"
#include "frames.h"
#include "hmap.h"
#include "html.h"
#include "out.h"
#include "report_allocator.h"

#define NO_SITE UINT32_MAX

struct site_row {
    uint32_t stack; /* a representative stack index, or SNAP_NO_STACK */
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

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
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
        *col = sat_add(*col, g->v[i].bytes);
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
    m->stack_row = malloc((s->nstacks ? s->nstacks : 1) * sizeof *m->stack_row);
    if (m->stack_row == NULL)
        return -1;
    for (size_t i = 0; i < s->nstacks; i++)
        m->stack_row[i] = NO_SITE;
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
            m->rows[r].alloc_bytes = sat_add(m->rows[r].alloc_bytes, (uint64_t)e->delta);
        } else if (e->delta < 0) {
            m->rows[r].frees++;
        }
    }
    return 0;
}

static void model_free(struct model *m)
{
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

static void write_stack_ref(struct jsonw *w, uint32_t stack)
{
    if (stack == SNAP_NO_STACK)
        jsonw_i64(w, -1);
    else
        jsonw_u64(w, stack);
}

static void write_groups(struct jsonw *w, const struct snap_groups *g)
{
    jsonw_begin_array(w);
    for (size_t i = 0; i < g->n; i++) {
        jsonw_begin_array(w);
        write_stack_ref(w, g->v[i].stack);
        jsonw_u64(w, g->v[i].bytes);
        jsonw_u64(w, g->v[i].count);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
}

/* One column of the site table: a JSON array of one number per row. */
enum site_col { COL_STACK, COL_AT_PEAK, COL_LIVE, COL_OOM, COL_ALLOCS, COL_FREES,
                COL_ALLOC_BYTES, COL_KINDS };

static void write_site_column(struct jsonw *w, struct model *m, const uint32_t *order,
                              enum site_col c)
{
    jsonw_begin_array(w);
    for (size_t i = 0; i < m->nrows; i++) {
        const struct site_row *r = &m->rows[order[i]];
        switch (c) {
        case COL_STACK: write_stack_ref(w, r->stack); break;
        case COL_AT_PEAK: jsonw_u64(w, r->at_peak); break;
        case COL_LIVE: jsonw_u64(w, r->live); break;
        case COL_OOM: jsonw_u64(w, r->oom); break;
        case COL_ALLOCS: jsonw_u64(w, r->allocs); break;
        case COL_FREES: jsonw_u64(w, r->frees); break;
        case COL_ALLOC_BYTES: jsonw_u64(w, r->alloc_bytes); break;
        case COL_KINDS: jsonw_u64(w, r->kinds); break; /* bit per enum snap_kind */
        }
    }
    jsonw_end_array(w);
}

/* The site table by column, labels as indices into "labels" (as text
 * views print them, a Python file by its basename): for 100 000 sites a
 * tenth of the objects to parse that rows of ten values would make. */
static int write_sites(struct jsonw *w, struct model *m, const uint32_t *order)
{
    jsonw_key(w, "kind_names");
    jsonw_begin_array(w);
    for (int k = 0; k < KIND_COUNT; k++)
        jsonw_string(w, snapshot_kind_name(k));
    jsonw_end_array(w);
    jsonw_key(w, "counted");
    jsonw_bool(w, m->counted);
    struct arena a;
    struct hmap map;
    arena_init(&a);
    hmap_init(&map, &a);
    const char **labels = NULL;
    uint32_t *label_of = malloc((m->nrows ? m->nrows : 1) * sizeof *label_of);
    size_t nlabels = 0, cap = 0;
    int rc = label_of ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < m->nrows; i++) {
        uint32_t id = frames_site(m->s, m->rows[order[i]].stack, BY_STACK);
        const char *l = id == FRAMES_NONE ? "[no stack]"
                                          : frames_site_get(m->s->ctx, BY_STACK, id)->display;
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
        jsonw_key(w, "labels");
        jsonw_begin_array(w);
        for (size_t i = 0; i < nlabels; i++)
            jsonw_string(w, labels[i]);
        jsonw_end_array(w);
        jsonw_key(w, "sites");
        jsonw_begin_object(w);
        jsonw_key(w, "label");
        jsonw_begin_array(w);
        for (size_t i = 0; i < m->nrows; i++)
            jsonw_u64(w, label_of[i]);
        jsonw_end_array(w);
        static const char *const names[] = {"stack", "at_peak", "live", "oom", "allocs",
                                            "frees", "alloc_bytes", "kinds"};
        for (int c = COL_STACK; c <= COL_KINDS; c++) {
            jsonw_key(w, names[c]);
            /* counts from a thinned log are unknown: no column */
            if (!m->counted && (c == COL_ALLOCS || c == COL_FREES || c == COL_ALLOC_BYTES))
                jsonw_null(w);
            else
                write_site_column(w, m, order, (enum site_col)c);
        }
        jsonw_end_object(w);
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
};

static void point(struct jsonw *w, int64_t t, uint64_t total, const int64_t *band, size_t nb)
{
    jsonw_begin_array(w);
    jsonw_i64(w, t);
    jsonw_u64(w, total);
    for (size_t b = 0; b < nb; b++)
        jsonw_i64(w, band[b]);
    jsonw_end_array(w);
}

/* The track's points: every event, or per time slice the lowest and the
 * highest total (in time order) when there are too many to draw. */
static int write_points(struct jsonw *w, struct model *m, const struct track *t,
                        const uint32_t *band_of_row, size_t nb, int64_t end)
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
    jsonw_begin_array(w);
    point(w, 0, 0, cur, nb);
    for (size_t i = 0; i < ev->n; i++) {
        const struct snap_event *e = &ev->v[i];
        if (e->device != t->device)
            continue;
        if (nb > 0 && !e->unfocused) {
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
            const int64_t *a = lo[0] <= hi[0] ? lo : hi, *b = a == lo ? hi : lo;
            point(w, a[0], (uint64_t)a[1], a + 2, nb);
            if (b[0] != a[0])
                point(w, b[0], (uint64_t)b[1], b + 2, nb);
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
    if (have) {
        const int64_t *a = lo[0] <= hi[0] ? lo : hi, *b = a == lo ? hi : lo;
        point(w, a[0], (uint64_t)a[1], a + 2, nb);
        if (b[0] != a[0])
            point(w, b[0], (uint64_t)b[1], b + 2, nb);
    }
    point(w, end, t->current, cur, nb);
    jsonw_end_array(w);
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

static int write_track(struct jsonw *w, struct model *m, const struct track *t)
{
    struct snapshot *s = m->s;
    /* Bands: the track's biggest call sites at its peak (live when it never
     * peaked above zero). */
    const struct snap_groups *g = t->peak_g->n ? t->peak_g : t->live_g;
    uint32_t bands[HTML_BANDS];
    size_t nb = 0;
    uint32_t *band_of_row = NULL;
    bool split = m->counted;
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
    jsonw_begin_object(w);
    jsonw_key(w, "name");
    jsonw_string(w, t->name);
    jsonw_key(w, "ordinal");
    jsonw_i64(w, t->device);
    jsonw_key(w, "total");
    jsonw_u64(w, t->total);
    jsonw_key(w, "free");
    jsonw_u64(w, t->free);
    jsonw_key(w, "limit");
    jsonw_u64(w, t->limit);
    jsonw_key(w, "current");
    jsonw_u64(w, t->current);
    jsonw_key(w, "peak");
    jsonw_u64(w, t->peak);
    jsonw_key(w, "peak_ns");
    jsonw_i64(w, t->peak_ns);
    html_tensors_write(w, t->al, t->peak_allocated);
    int64_t end = log_end(s);
    jsonw_key(w, "end_ns");
    jsonw_i64(w, end);
    jsonw_key(w, "groups");
    jsonw_begin_object(w);
    jsonw_key(w, "peak");
    write_groups(w, t->peak_g);
    jsonw_key(w, "live");
    write_groups(w, t->live_g);
    if (s->oom.present && s->oom.device == t->device) {
        jsonw_key(w, "oom");
        write_groups(w, &s->oom.live);
    }
    jsonw_end_object(w);
    jsonw_key(w, "bands");
    jsonw_begin_array(w);
    for (size_t b = 0; b < nb; b++)
        jsonw_u64(w, m->pos[bands[b]]);
    jsonw_end_array(w);
    jsonw_key(w, "points");
    int rc = write_points(w, m, t, band_of_row, nb, end);
    jsonw_end_object(w);
    free(band_of_row);
    return rc;
}

/* The post-mortem's first sentence: what failed, and its cause, as the
 * text report words them (oom_text.h). */
static void cause_sentence(const struct snapshot *s, char *buf, size_t n)
{
    char what[512], why[1024];
    snprintf(buf, n, "%s: %s.", oom_text_failure(s, what, sizeof what),
             oom_text_cause(s, why, sizeof why));
}

static void write_oom(struct jsonw *w, const struct snapshot *s)
{
    const struct snap_oom *o = &s->oom;
    jsonw_key(w, "oom");
    if (!snapshot_is_oom(s)) {
        jsonw_null(w);
        return;
    }
    char text[1600];
    cause_sentence(s, text, sizeof text);
    jsonw_begin_object(w);
    jsonw_key(w, "sentence");
    jsonw_string(w, text);
    jsonw_key(w, "cause");
    jsonw_string(w, snapshot_cause_name(o));
    jsonw_key(w, "entry");
    jsonw_string(w, o->entry_point);
    jsonw_key(w, "kind");
    jsonw_string(w, snapshot_kind_name(o->kind));
    jsonw_key(w, "device");
    jsonw_i64(w, o->device);
    jsonw_key(w, "stack");
    write_stack_ref(w, o->stack);
    static const char *const keys[] = {"requested", "total", "free", "limit", "tracked",
                                       "untracked", "shortfall", "attempts", "released",
                                       "released_count"};
    const uint64_t vals[] = {o->requested_bytes, o->total_bytes, o->free_bytes,
                             o->limit_bytes, o->tracked_bytes, o->untracked_bytes,
                             o->shortfall_bytes, o->attempts, o->released_bytes,
                             o->released_count};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        jsonw_key(w, keys[i]);
        jsonw_u64(w, vals[i]);
    }
    jsonw_key(w, "time_ns");
    jsonw_i64(w, o->time_ns);
    jsonw_key(w, "recovered");
    jsonw_tribool(w, o->recovered);
    jsonw_key(w, "by_kind");
    jsonw_begin_object(w);
    for (int k = 0; k < DEVICE_KINDS; k++) {
        jsonw_key(w, snapshot_kind_name(k));
        jsonw_u64(w, o->by_kind[k]);
    }
    jsonw_end_object(w);
    jsonw_key(w, "live");
    write_groups(w, &o->live);
    html_layout_write(w, o);
    const struct snap_allocator *al = &o->allocator;
    jsonw_key(w, "allocator");
    if (!al->present) {
        jsonw_null(w);
    } else {
        char sent[512];
        jsonw_begin_object(w);
        jsonw_key(w, "name");
        jsonw_string(w, al->name);
        jsonw_key(w, "sentence");
        jsonw_string(w, report_allocator_sentence(o, sent, sizeof sent));
        static const char *const ak[] = {"requested", "allocated", "reserved", "unallocated",
                                         "largest_free_small", "largest_free_large", "limit",
                                         "segments"};
        const uint64_t av[] = {al->requested_bytes, al->allocated_bytes, al->reserved_bytes,
                               al->reserved_unallocated_bytes, al->largest_free_small,
                               al->largest_free_large, al->limit_bytes, al->segments};
        for (size_t i = 0; i < sizeof ak / sizeof ak[0]; i++) {
            jsonw_key(w, ak[i]);
            jsonw_u64(w, av[i]);
        }
        html_tensors_write(w, al, al->peak_allocated_bytes);
        jsonw_end_object(w);
    }
    jsonw_end_object(w);
}

static void write_meta(struct jsonw *w, const struct snapshot *s)
{
    jsonw_key(w, "file");
    jsonw_string(w, s->file);
    jsonw_key(w, "exe");
    jsonw_string(w, s->process.exe);
    jsonw_key(w, "pid");
    jsonw_i64(w, s->process.pid);
    jsonw_key(w, "rank");
    jsonw_i64(w, s->process.rank);
    jsonw_key(w, "host");
    jsonw_string(w, s->process.host);
    jsonw_key(w, "reason");
    jsonw_string(w, s->reason);
    jsonw_key(w, "recovered");
    jsonw_string(w, s->recovered); /* null unless read from a stream */
    jsonw_key(w, "tool_version");
    jsonw_string(w, s->process.tool_version);
    jsonw_key(w, "cmdline");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->process.ncmdline; i++)
        jsonw_string(w, s->process.cmdline[i]);
    jsonw_end_array(w);
    jsonw_key(w, "dump_ns");
    jsonw_i64(w, s->process.dump_time_ns);
    jsonw_key(w, "thinned");
    jsonw_bool(w, !(s->events.thinned == 0 && s->events.stride <= 1));
    jsonw_key(w, "events_recorded");
    jsonw_u64(w, s->events.recorded);
    jsonw_key(w, "events_kept");
    jsonw_u64(w, s->events.n);
}

/* Stacks by column: stack_entry (an index into stack_entries, the CUDA
 * entry points), stack_len (frames per stack) and stack_frames, one string
 * of every stack's frame indices in turn, innermost first, each in
 * frame_width base-64 digits (A-Z a-z 0-9 + /): for a 100 000-stack file a
 * third of the size of arrays of numbers, and three values to parse
 * instead of 300 000. */
static int write_stacks(struct jsonw *w, const struct snapshot *s)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned width = 1;
    for (uint64_t span = 64; span <= s->ctx->nframes && width < 6; span *= 64)
        width++;
    jsonw_key(w, "frame_width");
    jsonw_u64(w, width);
    /* entry points: few distinct ones, told apart by their interned text */
    const char **entries = NULL;
    size_t nentries = 0, cap = 0, total = 0;
    uint32_t *entry_of = malloc((s->nstacks ? s->nstacks : 1) * sizeof *entry_of);
    if (entry_of == NULL)
        return -1;
    for (size_t i = 0; i < s->nstacks; i++) {
        const char *e = s->stacks[i].entry ? s->stacks[i].entry : "unknown";
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
        total += s->stacks[i].nframes;
    }
    jsonw_key(w, "stack_entries");
    jsonw_begin_array(w);
    for (size_t k = 0; k < nentries; k++)
        jsonw_string(w, entries[k]);
    jsonw_end_array(w);
    jsonw_key(w, "stack_entry");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->nstacks; i++)
        jsonw_u64(w, entry_of[i]);
    jsonw_end_array(w);
    jsonw_key(w, "stack_len");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->nstacks; i++)
        jsonw_u64(w, s->stacks[i].nframes);
    jsonw_end_array(w);
    free(entries);
    free(entry_of);
    char *buf = malloc(total * width + 1);
    if (buf == NULL)
        return -1;
    char *p = buf;
    for (size_t i = 0; i < s->nstacks; i++) {
        const struct snap_stack *st = &s->stacks[i];
        for (uint32_t f = 0; f < st->nframes; f++)
            for (unsigned d = width; d > 0; d--)
                *p++ = digits[(st->frames[f] >> (6 * (d - 1))) & 63];
    }
    *p = '\0';
    jsonw_key(w, "stack_frames");
    jsonw_string(w, buf);
    free(buf);
    return 0;
}

static int write_file(struct jsonw *w, struct snapshot *s)
{
    struct model m;
    uint32_t *order = NULL;
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
    jsonw_begin_object(w);
    write_meta(w, s);
    if (write_stacks(w, s) != 0)
        goto out;
    if (write_sites(w, &m, order) != 0)
        goto out;
    /* the page builds its flame graph lazily and cannot count it */
    jsonw_key(w, "flame_nodes");
    jsonw_begin_object(w);
    static const char *const modes[] = {"peak", "live", "oom"};
    for (int md = HTML_FLAME_PEAK; md <= HTML_FLAME_OOM; md++) {
        uint64_t nn;
        if (md == HTML_FLAME_OOM && !s->oom.present)
            continue;
        if (html_flame_nodes(s, md, &nn) != 0)
            goto out;
        jsonw_key(w, modes[md]);
        jsonw_u64(w, nn);
    }
    jsonw_end_object(w);
    jsonw_key(w, "stack_site");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->nstacks; i++) {
        uint32_t r = m.stack_row[i];
        if (r == NO_SITE) {
            /* A stack nothing refers to: no row, hence no table position. */
            jsonw_i64(w, -1);
            continue;
        }
        jsonw_u64(w, m.pos[r]);
    }
    jsonw_end_array(w);
    jsonw_key(w, "devices");
    jsonw_begin_array(w);
    char names[64];
    for (size_t d = 0; d < s->ndevices; d++) {
        const struct snap_device *dv = &s->devices[d];
        snprintf(names, sizeof names, "device %" PRId64, dv->ordinal);
        struct track t = {names, dv->ordinal, dv->total_bytes, dv->free_bytes,
                          dv->limit_bytes, dv->current_bytes, dv->peak_bytes,
                          dv->peak_time_ns, &dv->at_peak, &dv->live, &dv->allocator,
                          report_allocator_peak(s, dv)};
        if (write_track(w, &m, &t) != 0)
            goto out;
    }
    if (s->host.present && s->host.stats.peak_bytes > 0) {
        struct track t = {"host pinned", -1, SNAP_UNKNOWN, SNAP_UNKNOWN, SNAP_UNKNOWN,
                          s->host.stats.current_bytes, s->host.stats.peak_bytes,
                          s->host.stats.peak_time_ns, &s->host.at_peak, &s->host.live,
                          NULL, SNAP_UNKNOWN};
        if (write_track(w, &m, &t) != 0)
            goto out;
    }
    jsonw_end_array(w);
    html_phases_write(w, s);
    html_roles_write(w, s);
    write_oom(w, s);
    jsonw_key(w, "attempts");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->ooms.nattempts; i++) {
        const struct snap_attempt *a = &s->ooms.attempts[i];
        jsonw_begin_array(w);
        jsonw_i64(w, a->t_ns);
        jsonw_i64(w, a->device);
        jsonw_u64(w, a->requested_bytes);
        jsonw_u64(w, a->chain);
        jsonw_u64(w, a->attempt);
        jsonw_string(w, a->outcome);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
    int na = advice_compute(s, adv);
    if (na < 0)
        goto out;
    jsonw_key(w, "advice");
    jsonw_begin_array(w);
    for (int i = 0; i < na; i++) {
        jsonw_begin_array(w);
        jsonw_string(w, adv[i].id);
        jsonw_string(w, adv[i].text);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
    jsonw_end_object(w);
    rc = 0;
out:
    free(adv);
    free(order);
    model_free(&m);
    return rc;
}

int html_model_write(struct jsonw *w, struct snapshot **s, size_t n, const char *kind)
{
    jsonw_begin_object(w);
    jsonw_key(w, "kind");
    jsonw_string(w, kind);
    jsonw_key(w, "generator");
    jsonw_string(w, "cumemtrace " CUMEMTRACE_CLI_VERSION);
    jsonw_key(w, "files");
    jsonw_begin_array(w);
    for (size_t i = 0; i < n; i++)
        if (write_file(w, s[i]) != 0)
            return -1;
    jsonw_end_array(w);
    /* Frames last: writing the files may have interned no new ones, but
     * the table is the context's, shared by every file. */
    const struct snapctx *ctx = s[0]->ctx;
    jsonw_key(w, "frames");
    jsonw_begin_array(w);
    for (size_t i = 0; i < ctx->nframes; i++) {
        const struct frame *fr = &ctx->frames[i];
        jsonw_begin_array(w);
        jsonw_string(w, fr->display);
        jsonw_u64(w, fr->type);
        jsonw_string(w, fr->name);
        jsonw_u64(w, fr->named);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
    jsonw_end_object(w);
    return 0;
}
