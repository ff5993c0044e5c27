/* snapshot_tensors.c - PyTorch's live blocks by the user's line: a device's
 * `tensors`, `peak_tensors`, `growth` and `tensor_series`, and
 * `oom.allocator.tensors`
 * (docs/snapshot-format.md).
 *
 * Each group's frames become frames of the context (frames_python), so a
 * group's site is the same frame in every file loaded together (diff
 * matches groups by it) and --hide, --python-only and --focus see the
 * stack as they see a driver stack's: the stack shown is filtered here, and
 * the group is marked unfocused for frame_filter_focus to drop after the
 * checks, which sum the groups as written.
 */
#include "snapshot_tensors.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_filter.h"
#include "frames.h"

/* One {file, line, function} frame; the strings stay in the buffer until
 * frames_python interns them. */
struct pyframe_read {
    const char *file, *function;
    int64_t line;
};
#define SNAP_TFRAME_SCHEMA(X) /* a frame of tensors' groups (site, stack), lines */ \
    X(pyframe_read, file, file, RAWN, 0)                                          \
    X(pyframe_read, line, line, I64N, 0)                                          \
    X(pyframe_read, function, function, RAWN, 0)

static const struct field pyframe_fields[] = {SNAP_TFRAME_SCHEMA(SCHEMA_FIELD)};

/* A frame, or null (SNAP_NO_FRAME) where null may stand for one. */
static int rd_pyframe(struct reader *r, uint32_t *out, bool nullable)
{
    *out = SNAP_NO_FRAME;
    if (nullable && reader_take_null(r))
        return 0;
    struct pyframe_read f = {NULL, NULL, SNAP_UNKNOWN_I64};
    int rc = reader_object(r, &f, pyframe_fields, NFIELDS(pyframe_fields));
    if (rc != 0)
        return rc;
    if (f.file == NULL && f.function == NULL)
        return reader_invalid(r, "names neither a file nor a function");
    *out = frames_python(r->ctx, f.file, f.line == SNAP_UNKNOWN_I64 ? -1 : f.line,
                         f.function);
    return *out == FRAMES_NONE ? reader_nomem(r) : 0;
}

static int rd_site(struct reader *r, void *obj)
{
    return rd_pyframe(r, &((struct snap_tgroup *)obj)->site, true);
}

/* The stack's frames gather in r->tmp (no driver stack is being read
 * inside a device), then go to the context's arena filtered. */
static int rd_stack_frame(struct reader *r, void *obj, size_t i)
{
    if (snapshot_vec_reserve((void **)&r->tmp, &r->tmp_cap, sizeof *r->tmp, i + 1))
        return reader_nomem(r);
    *(size_t *)obj = i + 1;
    return rd_pyframe(r, &r->tmp[i], false);
}

static int rd_stack(struct reader *r, void *obj)
{
    struct snap_tgroup *g = obj;
    size_t n = 0;
    if (!reader_take_null(r)) {
        int rc = reader_array(r, &n, rd_stack_frame);
        if (rc != 0)
            return rc;
    }
    if (n > UINT32_MAX)
        return reader_invalid(r, "has too many frames");
    g->unfocused = !frame_filter_focused(r->ctx, r->tmp, n);
    /* the stack as recorded, for the label: the site's place in it */
    uint32_t *rec = arena_alloc(&r->ctx->arena, (n ? n : 1) * sizeof *rec);
    if (rec == NULL)
        return reader_nomem(r);
    if (n > 0)
        memcpy(rec, r->tmp, n * sizeof *rec);
    g->recorded = rec;
    g->nrecorded = (uint32_t)n;
    n = frame_filter_apply(r->ctx, r->tmp, n);
    uint32_t *v = arena_alloc(&r->ctx->arena, (n ? n : 1) * sizeof *v);
    if (v == NULL)
        return reader_nomem(r);
    if (n > 0)
        memcpy(v, r->tmp, n * sizeof *v);
    g->frames = v;
    g->nframes = (uint32_t)n;
    return 0;
}

static int rd_forward_site(struct reader *r, void *obj)
{
    return rd_pyframe(r, &((struct snap_origin *)obj)->forward_site, true);
}

static const struct field origin_fields[] = {SNAP_ORIGIN_SCHEMA(SCHEMA_FIELD)};

int snapshot_read_origin(struct reader *r, void *obj)
{
    struct snap_origin *o = obj;
    *o = (struct snap_origin){NULL, NULL, SNAP_NO_FRAME};
    if (reader_take_null(r))
        return 0;
    int rc = reader_object(r, o, origin_fields, NFIELDS(origin_fields));
    if (rc == 0 && o->thread == NULL)
        o->thread = "?";
    return rc;
}

static const struct field group_fields[] = {SNAP_TGROUP_SCHEMA(SCHEMA_FIELD)};
static const struct field growth_fields[] = {SNAP_GROWTH_SCHEMA(SCHEMA_FIELD)};

/* The site, or where a filter dropped it (--hide) the first frame the
 * filters keep outward of it in the stack as recorded; the site itself
 * when none is kept. */
static uint32_t label_of(const struct snapctx *ctx, const struct snap_tgroup *g)
{
    if (g->site == SNAP_NO_FRAME || ctx->frames[g->site].shown != 2)
        return g->site;
    uint32_t i = 0;
    while (i < g->nrecorded && g->recorded[i] != g->site)
        i++;
    for (; i < g->nrecorded; i++)
        if (ctx->frames[g->recorded[i]].shown == 1)
            return g->recorded[i];
    return g->site;
}

/* One group appended to *v (n, cap beside it): a tensors object's groups
 * (fields: group_fields) and growth's rows (growth_fields) share the struct. */
static int rd_tgroup(struct reader *r, struct snap_tgroup **v, size_t *n, size_t *cap,
                     const struct field *fields, size_t nfields)
{
    struct snap_tgroup *g = reader_append(r, (void **)v, *n, cap, sizeof **v);
    if (g == NULL)
        return CLI_ENOMEM;
    g->site = g->origin.forward_site = SNAP_NO_FRAME;
    g->bytes_per_step = g->steps = SNAP_UNKNOWN;
    g->first_step = g->last_step = SNAP_UNKNOWN_I64;
    int rc = reader_object(r, g, fields, nfields);
    if (rc != 0)
        return rc;
    g->label = label_of(r->ctx, g);
    if (g->frames == NULL) { /* no "stack": the site alone */
        g->frames = g->site != SNAP_NO_FRAME ? &g->site : NULL;
        g->nframes = g->site != SNAP_NO_FRAME ? 1 : 0;
    }
    (*n)++;
    return 0;
}

static int rd_group(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_tensors *t = obj;
    return rd_tgroup(r, &t->v, &t->n, &t->cap, group_fields, NFIELDS(group_fields));
}

static const struct field more_fields[] = {SNAP_TENSORS_MORE_SCHEMA(SCHEMA_FIELD)};
static const struct field cache_fields[] = {SNAP_TENSORS_CACHE_SCHEMA(SCHEMA_FIELD)};

static const struct field tensors_fields[] = {SNAP_TENSORS_SCHEMA(SCHEMA_FIELD)};
static const struct field peak_fields[] = {
    SNAP_TENSORS_SCHEMA(SCHEMA_FIELD) SNAP_PEAK_TENSORS_SCHEMA(SCHEMA_FIELD)};

static int read_tensors(struct reader *r, struct snap_tensors *t, const struct field *fields,
                        size_t nfields)
{
    t->time_ns = t->step = SNAP_UNKNOWN_I64;
    t->cache_segments = t->cache_largest_free = SNAP_UNKNOWN;
    return reader_optional_object(r, t, &t->present, fields, nfields);
}

int snapshot_read_tensors(struct reader *r, void *obj)
{
    return read_tensors(r, obj, tensors_fields, NFIELDS(tensors_fields));
}

int snapshot_read_peak_tensors(struct reader *r, void *obj)
{
    return read_tensors(r, obj, peak_fields, NFIELDS(peak_fields));
}

static int rd_growth_row(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_growth *g = obj;
    return rd_tgroup(r, &g->v, &g->n, &g->cap, growth_fields, NFIELDS(growth_fields));
}

int snapshot_read_growth(struct reader *r, void *obj)
{
    struct snap_growth *g = obj;
    if (reader_take_null(r))
        return 0;
    g->present = true;
    return reader_array(r, g, rd_growth_row);
}

/* ---- tensor_series ---- */

static int rd_series_line(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_series *s = obj;
    uint32_t *line = READER_APPEND(r, s->lines, s->nlines, s->lines_cap);
    if (line == NULL)
        return CLI_ENOMEM;
    int rc = rd_pyframe(r, line, true);
    if (rc == 0)
        s->nlines++;
    return rc;
}

static int rd_reading_byte(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_sreading *x = obj;
    if (snapshot_vec_reserve((void **)&x->bytes, &x->cap, sizeof *x->bytes, x->nbytes + 1))
        return reader_nomem(r);
    int rc = reader_u64(r, &x->bytes[x->nbytes], false);
    if (rc == 0)
        x->nbytes++;
    return rc;
}

static const struct field reading_fields[] = {SNAP_SREADING_SCHEMA(SCHEMA_FIELD)};

static int rd_series_reading(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_series *s = obj;
    struct snap_sreading *x = READER_APPEND(r, s->v, s->n, s->cap);
    if (x == NULL)
        return CLI_ENOMEM;
    s->n++;
    x->step = x->time_ns = SNAP_UNKNOWN_I64;
    x->reserved_bytes = SNAP_UNKNOWN;
    return reader_object(r, x, reading_fields, NFIELDS(reading_fields));
}

static const struct field series_fields[] = {SNAP_SERIES_SCHEMA(SCHEMA_FIELD)};

int snapshot_read_series(struct reader *r, void *obj)
{
    struct snap_series *s = obj;
    int rc = reader_optional_object(r, s, &s->present, series_fields, NFIELDS(series_fields));
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        if (s->v[i].nbytes != s->nlines)
            rc = reader_invalid(r, "has a reading whose bytes are not one per line");
    return rc;
}

/* ---- checks (docs/snapshot-format.md, "Invariants") ---- */

typedef unsigned __int128 u128; /* sums of 64-bit sizes cannot overflow it */

static int check_tensors(const struct snapshot *s, struct cli_error *err, const char *where,
                         const struct snap_tensors *t, const char *figure, uint64_t value)
{
    if (!t->present)
        return 0;
    u128 bytes = t->has_more ? t->more_bytes : 0, count = t->has_more ? t->more_count : 0;
    for (size_t i = 0; i < t->n; i++) {
        bytes += t->v[i].bytes;
        count += t->v[i].count;
    }
    if (bytes != t->allocated_bytes || count != t->count)
        return snapshot_broken(s, err, "tensors: groups and more sum to allocated_bytes and count",
                               "%s.groups and more hold %" PRIu64 "%s bytes in %" PRIu64
                               "%s blocks, %s.allocated_bytes is %" PRIu64 ", count %" PRIu64,
                               where, (uint64_t)bytes, bytes > UINT64_MAX ? "+" : "",
                               (uint64_t)count, count > UINT64_MAX ? "+" : "", where,
                               t->allocated_bytes, t->count);
    if (value != SNAP_UNKNOWN && value != t->allocated_bytes)
        return snapshot_broken(s, err, "tensors: allocated_bytes is the allocator's",
                               "%s.allocated_bytes is %" PRIu64 ", %s is %" PRIu64, where,
                               t->allocated_bytes, figure, value);
    return 0;
}

int snapshot_tensors_check(const struct snapshot *s, struct cli_error *err)
{
    char where[64];
    for (size_t i = 0; i < s->ndevices; i++) {
        const struct snap_device *d = &s->devices[i];
        const struct snap_allocator *a = &d->allocator;
        snprintf(where, sizeof where, "devices[%zu].tensors", i);
        int rc = check_tensors(s, err, where, &d->tensors, "its allocator.allocated_bytes",
                               a->present ? a->allocated_bytes : SNAP_UNKNOWN);
        if (rc != 0)
            return rc;
        snprintf(where, sizeof where, "devices[%zu].peak_tensors", i);
        rc = check_tensors(s, err, where, &d->peak_tensors,
                           "its allocator.peak_allocated_bytes (max_memory_allocated)",
                           a->present ? a->peak_allocated_bytes : SNAP_UNKNOWN);
        if (rc != 0)
            return rc;
    }
    const struct snap_allocator *a = &s->oom.allocator;
    if (s->oom.present && a->present)
        return check_tensors(s, err, "oom.allocator.tensors", &a->tensors,
                             "oom.allocator.allocated_bytes", a->allocated_bytes);
    return 0;
}
