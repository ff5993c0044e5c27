/* snapshot_phases.c - reading the program's phases (docs/snapshot-format.md
 * "phases", devices[].by_phase), checking them, and naming them by path.
 * A file without phases leaves everything empty: no view changes. */
#include "snapshot_phases.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- by_phase ---- */

static int rd_top_item(struct reader *r, void *obj, size_t i)
{
    static const struct field fields[] = {
        SNAP_GROUP_STACK_SCHEMA(SCHEMA_FIELD) SNAP_PHASE_TOP_SCHEMA(SCHEMA_FIELD)};
    struct snap_phase_row *row = obj;
    (void)i;
    struct snap_group g = {0};
    g.stack = SNAP_NO_STACK;
    int rc = reader_object(r, &g, fields, NFIELDS(fields));
    if (rc == 0 && row->ntop < SNAP_PHASE_TOP) {
        if (g.stack_id == SNAP_UNKNOWN_I64)
            g.stack_id = 0;
        row->top[row->ntop++] = g;
    }
    return rc;
}

/* A row being read, with its container (sites go into rows->sites):
 * row first, so the row's FIELDs apply to it. */
struct row_ctx {
    struct snap_phase_row row;
    struct snap_phase_rows *rows;
    bool has_sites;
};

static int rd_site_field(struct reader *r, void *obj, size_t i)
{
    struct snap_phase_site *st = obj;
    uint64_t *const at[] = {NULL, &st->at_peak_bytes, &st->bytes, &st->allocs,
                            &st->bytes_allocated};
    if (i == 0)
        return reader_i64(r, &st->stack_id, false);
    if (i < 5)
        return reader_u64(r, at[i], false);
    return json_skip(&r->c) == JSON_OK ? 0 : reader_json_failed(r);
}

static int rd_site(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct row_ctx *c = obj;
    struct snap_phase_rows *rows = c->rows;
    struct snap_phase_site *st = READER_APPEND(r, rows->sites, rows->nsites, rows->sites_cap);
    if (st == NULL)
        return CLI_ENOMEM;
    st->stack = SNAP_NO_STACK;
    int rc = reader_array(r, st, rd_site_field);
    if (rc == 0) {
        rows->nsites++;
        c->row.nsites++;
    }
    return rc;
}

static int rd_sites(struct reader *r, void *obj)
{
    struct row_ctx *c = obj;
    c->has_sites = true;
    c->row.first_site = c->rows->nsites;
    return reader_array(r, c, rd_site);
}

static const struct field row_fields[] = {SNAP_PHASE_ROW_SCHEMA(SCHEMA_FIELD)};

static int rd_row(struct reader *r, void *obj, size_t i)
{
    struct snap_phase_rows *rows = obj;
    (void)i;
    if (snapshot_vec_reserve((void **)&rows->v, &rows->cap, sizeof *rows->v, rows->n + 1))
        return reader_nomem(r);
    /* read into a local: reading its sites may move nothing of rows->v,
     * but the row's fields and its sites' container travel together */
    struct row_ctx c = {.rows = rows};
    c.row.first_site = rows->nsites;
    int rc = reader_object(r, &c, row_fields, NFIELDS(row_fields));
    if (rc == 0 && !c.has_sites) /* the writer lists them in every row */
        return reader_invalid(r, "has no \"sites\" (an array of its call sites)");
    if (rc == 0)
        rows->v[rows->n++] = c.row;
    return rc;
}

int snapshot_read_by_phase(struct reader *r, void *obj)
{
    struct snap_phase_rows *rows = obj;
    if (reader_take_null(r))
        return 0;
    rows->present = true;
    return reader_array(r, rows, rd_row);
}

/* ---- the phases section ---- */

static const struct field phase_fields[] = {SNAP_PHASE_SCHEMA(SCHEMA_FIELD)};

static int rd_phase(struct reader *r, void *obj, size_t i)
{
    struct snap_phases *p = obj;
    (void)i;
    struct snap_phase *e = READER_APPEND(r, p->v, p->n, p->cap);
    if (e == NULL)
        return CLI_ENOMEM;
    int rc = reader_object(r, e, phase_fields, NFIELDS(phase_fields));
    if (rc != 0)
        return rc;
    if (e->id < 1 || (p->n > 0 && e->id <= p->v[p->n - 1].id))
        return reader_invalid(r, "phase ids from 1, ascending");
    if (e->parent < 0 || e->parent >= e->id)
        return reader_invalid(r, "a phase's parent listed before it (or 0)");
    if (e->name == NULL)
        e->name = "";
    p->n++;
    return 0;
}

/* One row [start_ns, end_ns|null, thread, phase, kind]. */
static int rd_span(struct reader *r, void *obj, size_t i)
{
    struct snap_phases *p = obj;
    (void)i;
    struct snap_span *e = READER_APPEND(r, p->spans, p->nspans, p->spans_cap);
    if (e == NULL)
        return CLI_ENOMEM;
    int rc = json_enter_array(&r->c);
    if (rc != JSON_OK)
        return reader_bad_value(r, rc, "an array (one range row)");
    size_t j = 0;
    while ((rc = json_next_element(&r->c)) == 1) {
        reader_push_index(r, j);
        if (j == 0)
            rc = reader_i64(r, &e->start_ns, false);
        else if (j == 1)
            rc = reader_i64(r, &e->end_ns, true);
        else if (j == 2)
            rc = reader_i64(r, &e->thread, true);
        else if (j == 3)
            rc = reader_i64(r, &e->phase, false);
        else if (j == 4) {
            const char *k;
            size_t n;
            rc = json_get_span(&r->c, &k, &n);
            if (rc != JSON_OK) {
                rc = reader_bad_value(r, rc, "a string");
            } else {
                e->kind = n == 4 && memcmp(k, "mark", 4) == 0       ? SPAN_MARK
                          : n == 8 && memcmp(k, "startend", 8) == 0 ? SPAN_STARTEND
                                                                    : SPAN_PUSH;
                rc = 0;
            }
        } else if (json_skip(&r->c) != JSON_OK) {
            rc = reader_json_failed(r);
        }
        reader_pop(r);
        if (rc != 0)
            return rc;
        j++;
    }
    if (rc < 0)
        return reader_json_failed(r);
    if (j < 4)
        return reader_invalid(r, "a range row of 5 columns");
    if (e->end_ns != SNAP_UNKNOWN_I64 && e->end_ns < e->start_ns)
        return reader_invalid(r, "a range that ends after it starts");
    p->nspans++;
    return 0;
}

static const struct field ranges_fields[] = {SNAP_PHASES_RANGES_SCHEMA(SCHEMA_FIELD)};

static int rd_ranges(struct reader *r, void *obj)
{
    bool present;
    return reader_optional_object(r, obj, &present, ranges_fields, NFIELDS(ranges_fields));
}

static const struct field phases_fields[] = {SNAP_PHASES_SCHEMA(SCHEMA_FIELD)};

/* Paths: a parent comes before its children (rd_phase checks it). */
static int make_paths(struct reader *r, struct snap_phases *p)
{
    for (size_t i = 0; i < p->n; i++) {
        struct snap_phase *e = &p->v[i];
        const struct snap_phase *up = e->parent ? snapshot_phase(r->s, e->parent) : NULL;
        if (up == NULL) {
            e->path = e->name;
            continue;
        }
        size_t a = strlen(up->path), b = strlen(e->name);
        char *s = arena_alloc(&r->ctx->arena, a + b + 2);
        if (s == NULL)
            return reader_nomem(r);
        memcpy(s, up->path, a);
        s[a] = '/';
        memcpy(s + a + 1, e->name, b + 1);
        e->path = s;
    }
    return 0;
}

int snapshot_read_phases(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    int rc = reader_optional_object(r, &s->phases, &s->phases.present, phases_fields,
                                    NFIELDS(phases_fields));
    if (rc == 0 && s->phases.present)
        rc = make_paths(r, &s->phases);
    return rc;
}

/* ---- look-ups ---- */

const struct snap_phase *snapshot_phase(const struct snapshot *s, int64_t id)
{
    const struct snap_phases *p = &s->phases;
    if (id < 1)
        return NULL;
    /* the writer lists every id from 1: the row is usually at id - 1 */
    if ((uint64_t)id <= p->n && p->v[id - 1].id == id)
        return &p->v[id - 1];
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->n && p->v[lo].id == id ? &p->v[lo] : NULL;
}

const char *snapshot_phase_path(const struct snapshot *s, int64_t id)
{
    if (id == 0)
        return "(outside every range)";
    const struct snap_phase *p = snapshot_phase(s, id);
    return p != NULL ? p->path : "?";
}

/* ---- checks ---- */

static int check_rows(struct snapshot *s, struct cli_error *err, struct snap_phase_rows *rows,
                      const char *where, uint64_t peak, uint64_t current)
{
    if (!rows->present)
        return 0;
    uint64_t at_peak = 0, now = 0;
    for (size_t i = 0; i < rows->n; i++) {
        struct snap_phase_row *row = &rows->v[i];
        at_peak += row->at_peak_bytes;
        now += row->bytes;
        if (row->phase != 0 && snapshot_phase(s, row->phase) == NULL)
            return errors_set(err, CLI_EBADREF,
                              "cannot read snapshot '%s': %s.by_phase[%zu] refers to phase "
                              "%" PRId64 ", which \"phases\" does not list",
                              s->file, where, i, row->phase);
        uint64_t site_peak = 0, site_now = 0;
        for (size_t k = 0; k < row->nsites; k++) {
            struct snap_phase_site *st = &rows->sites[row->first_site + k];
            site_peak += st->at_peak_bytes;
            site_now += st->bytes;
            if (st->stack_id == 0)
                continue;
            st->stack = snapshot_stack_index(s, st->stack_id);
            if (st->stack == SNAP_NO_STACK)
                return errors_set(err, CLI_EBADREF,
                                  "cannot read snapshot '%s': %s.by_phase[%zu].sites "
                                  "refers to stack %" PRId64 ", which \"stacks\" does not "
                                  "define", s->file, where, i, st->stack_id);
        }
        if (site_peak != row->at_peak_bytes || site_now != row->bytes)
            return snapshot_broken(s, err, "phases: a phase's sites sum to its bytes",
                                   "%s.by_phase[%zu] sites hold %" PRIu64 " at the peak and %"
                                   PRIu64 " now, the row %" PRIu64 " and %" PRIu64, where, i,
                                   site_peak, site_now, row->at_peak_bytes, row->bytes);
        for (size_t t = 0; t < row->ntop; t++) {
            struct snap_group *g = &row->top[t];
            if (g->stack_id == 0)
                continue;
            g->stack = snapshot_stack_index(s, g->stack_id);
            if (g->stack == SNAP_NO_STACK)
                return errors_set(err, CLI_EBADREF,
                                  "cannot read snapshot '%s': %s.by_phase[%zu].top_at_peak "
                                  "refers to stack %" PRId64 ", which \"stacks\" does not "
                                  "define", s->file, where, i, g->stack_id);
        }
    }
    if (at_peak != peak)
        return snapshot_broken(s, err, "phases: at_peak_bytes sum to peak_bytes",
                               "%s.by_phase at_peak_bytes sum to %" PRIu64
                               ", %s.peak_bytes is %" PRIu64, where, at_peak, where, peak);
    if (now != current)
        return snapshot_broken(s, err, "phases: at_peak_bytes sum to peak_bytes",
                               "%s.by_phase bytes sum to %" PRIu64
                               ", %s.current_bytes is %" PRIu64, where, now, where, current);
    return 0;
}

int snapshot_phases_check(struct snapshot *s, struct cli_error *err)
{
    char where[40];
    for (size_t d = 0; d < s->ndevices; d++) {
        struct snap_device *dev = &s->devices[d];
        snprintf(where, sizeof where, "devices[%zu]", d);
        int rc = check_rows(s, err, &dev->by_phase, where, dev->peak_bytes, dev->current_bytes);
        if (rc != 0)
            return rc;
    }
    return check_rows(s, err, &s->host.by_phase, "host_pinned", s->host.stats.peak_bytes,
                      s->host.stats.current_bytes);
}
