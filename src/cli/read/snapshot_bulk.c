/* snapshot_bulk.c - the two sections that hold most of a snapshot's bytes,
 * read streaming into compact structs: events (rows by column, in any
 * documented column order) and stacks (frames interned once: most frames
 * repeat across stacks, so the raw bytes are looked up before a frame is
 * named), with "modules" first so that native frames are named from debug
 * information as they are read.
 */
#include "snapshot_bulk.h"

#include <stdio.h>
#include <string.h>

#include "frame_filter.h"
#include "frames.h"
#include "json_lane.h"
#include "symbolize.h"

#define EXPANDED 0x80000000u /* raw_frames value: an index into expand */

/* ---- events ---- */

/* The documented columns, in the documented order. */
enum { COL_T, COL_DEVICE, COL_KIND, COL_DELTA, COL_STACK, COL_CURRENT, NCOLS };
static const char *const col_names[NCOLS] = {
    "t_ns", "device", "kind", "delta", "stack", "current",
};

void snapshot_bulk_init(struct reader *r)
{
    for (int j = 0; j < NCOLS; j++)
        r->col_of_pos[j] = j;
    r->ncols = NCOLS;
}

static int rd_column(struct reader *r, void *obj, size_t i)
{
    int *seen = obj;
    const char *name;
    int rc = reader_str(r, &name, false);
    if (rc != 0)
        return rc;
    if (i >= sizeof r->col_of_pos / sizeof r->col_of_pos[0])
        return reader_invalid(r, "is one column too many (at most 16 are supported)");
    int col = -1;
    for (int j = 0; j < NCOLS; j++)
        if (strcmp(name, col_names[j]) == 0)
            col = j;
    if (col >= 0)
        seen[col]++;
    if (r->data_read && (i >= NCOLS || col != (int)i))
        return reader_invalid(r, "comes after events.data and differs from the "
                          "documented column order");
    r->col_of_pos[i] = col;
    r->ncols = i + 1;
    return 0;
}

static int rd_columns(struct reader *r, void *obj)
{
    (void)obj;
    if (reader_take_null(r))
        return 0;
    int seen[NCOLS] = {0};
    r->ncols = 0;
    int rc = reader_array(r, seen, rd_column);
    if (rc != 0)
        return rc;
    for (int j = 0; j < NCOLS; j++) {
        if (seen[j] != 1) {
            char what[96];
            snprintf(what, sizeof what, "must name column \"%s\" exactly once",
                     col_names[j]);
            return reader_invalid(r, what);
        }
    }
    return 0;
}

static int rd_event_value(struct reader *r, struct snap_event *e, int col)
{
    int64_t v;
    int rc;
    switch (col) {
    case COL_T:
        return reader_i64(r, &e->t_ns, false);
    case COL_DEVICE:
        rc = reader_i64(r, &v, false);
        if (rc == 0 && (v < -1 || v > INT32_MAX))
            return reader_invalid(r, "is not a device ordinal (-1 or more)");
        e->device = (int32_t)v;
        return rc;
    case COL_KIND: {
        const char *k;
        rc = reader_str(r, &k, false);
        if (rc == 0)
            e->kind = (uint8_t)snapshot_kind_parse(k);
        return rc;
    }
    case COL_DELTA:
        return reader_i64(r, &e->delta, false);
    case COL_STACK:
        rc = reader_i64(r, &e->stack_id, true);
        if (e->stack_id == SNAP_UNKNOWN_I64)
            e->stack_id = 0;
        return rc;
    case COL_CURRENT:
        return reader_u64(r, &e->current, false);
    default:
        return json_skip(&r->c) == JSON_OK ? 0 : reader_json_failed(r);
    }
}

/* A comma between two values of a row, whitespace around it. */
LANE_INLINE const char *row_comma(const char *p)
{
    p = lane_ws(p);
    return *p == ',' ? lane_ws(p + 1) : NULL;
}

/* The row as the library writes it, read in one go (a snapshot has a
 * million): the documented columns in their order, plain integers, the
 * stack an integer or null, the kind a string without escapes.  Returns
 * false, having consumed nothing, for any other row: rd_event then reads
 * it value by value and gives the message for what is wrong (json_lane.h:
 * whatever this accepts, that reading accepts with the same values). */
static bool fast_event(struct reader *r, struct snap_event *e)
{
    const char *end = r->c.end, *p = lane_ws(r->c.p), *kind;
    size_t kn;
    int64_t dev;
    if (r->c.status != JSON_OK || *p != '[')
        return false;
    if ((p = lane_i64(lane_ws(p + 1), end, &e->t_ns)) == NULL ||
        (p = row_comma(p)) == NULL || (p = lane_i64(p, end, &dev)) == NULL ||
        dev < -1 || dev > INT32_MAX || (p = row_comma(p)) == NULL ||
        (p = lane_span(p, end, &kind, &kn)) == NULL || (p = row_comma(p)) == NULL ||
        (p = lane_i64(p, end, &e->delta)) == NULL || (p = row_comma(p)) == NULL)
        return false;
    const char *q = lane_null(p);
    if (q != NULL)
        e->stack_id = 0;
    else if ((q = lane_i64(p, end, &e->stack_id)) == NULL)
        return false;
    if ((p = row_comma(q)) == NULL || (p = lane_u64(p, end, &e->current)) == NULL)
        return false;
    p = lane_ws(p);
    if (*p != ']')
        return false;
    if (e->stack_id == SNAP_UNKNOWN_I64) /* as rd_event_value reads it */
        e->stack_id = 0;
    e->device = (int32_t)dev;
    e->kind = (uint8_t)snapshot_kind_span(kind, kn);
    r->c.p = (char *)p + 1;
    return true;
}

/* As fast_event for a row the view does not keep: each value is checked
 * to be what fast_event would accept (an integer of at most 18 digits fits
 * every column's type), only the device converted (its range is checked). */
static bool fast_event_check(struct reader *r)
{
    const char *end = r->c.end, *p = lane_ws(r->c.p), *kind;
    size_t kn;
    int64_t dev;
    if (r->c.status != JSON_OK || *p != '[')
        return false;
    if ((p = lane_int_syntax(lane_ws(p + 1), end, true)) == NULL ||
        (p = row_comma(p)) == NULL || (p = lane_i64(p, end, &dev)) == NULL ||
        dev < -1 || dev > INT32_MAX || (p = row_comma(p)) == NULL ||
        (p = lane_span(p, end, &kind, &kn)) == NULL || (p = row_comma(p)) == NULL ||
        (p = lane_int_syntax(p, end, true)) == NULL || (p = row_comma(p)) == NULL)
        return false;
    const char *q = lane_null(p);
    if (q == NULL && (q = lane_int_syntax(p, end, true)) == NULL)
        return false;
    if ((p = row_comma(q)) == NULL || (p = lane_int_syntax(p, end, false)) == NULL)
        return false;
    p = lane_ws(p);
    if (*p != ']')
        return false;
    r->c.p = (char *)p + 1;
    return true;
}

static int rd_event(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_events *ev = obj;
    struct snap_event one, *e = &one; /* where a row that is not kept goes */
    bool keep = !r->ctx->no_event_rows;
    if (!keep && r->plain_rows && fast_event_check(r)) {
        ev->rows++;
        return 0;
    }
    if (keep) {
        if (snapshot_vec_reserve((void **)&ev->v, &ev->alloc, sizeof *ev->v, ev->n + 1))
            return reader_nomem(r);
        e = &ev->v[ev->n];
    }
    memset(e, 0, sizeof *e);
    if (r->plain_rows && fast_event(r, e)) {
        ev->n += keep;
        ev->rows++;
        return 0;
    }
    memset(e, 0, sizeof *e);
    int rc = json_enter_array(&r->c);
    if (rc != JSON_OK)
        return reader_bad_value(r, rc, "an array (one event row)");
    size_t j = 0;
    while ((rc = json_next_element(&r->c)) == 1) {
        int col = j < r->ncols ? r->col_of_pos[j] : -1;
        reader_push_index(r, j);
        rc = rd_event_value(r, e, col);
        reader_pop(r);
        if (rc != 0)
            return rc;
        j++;
    }
    if (rc < 0)
        return reader_json_failed(r);
    if (j < r->ncols) {
        char what[64];
        snprintf(what, sizeof what, "has %zu values, expected %zu", j, r->ncols);
        return reader_invalid(r, what);
    }
    ev->n += keep;
    ev->rows++;
    return 0;
}

static int rd_data(struct reader *r, void *obj)
{
    struct snap_events *ev = obj;
    r->data_read = true;
    if (reader_take_null(r))
        return 0;
    r->plain_rows = r->ncols == NCOLS;
    for (int j = 0; j < NCOLS && r->plain_rows; j++)
        r->plain_rows = r->col_of_pos[j] == j;
    return reader_array(r, ev, rd_event);
}

static const struct field events_fields[] = {SNAP_EVENTS_SCHEMA(SCHEMA_FIELD)};

int snapshot_bulk_events(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    if (reader_take_null(r))
        return 0;
    return reader_object(r, &s->events, events_fields, NFIELDS(events_fields));
}

/* ---- stacks ---- */

/* ---- modules (before stacks in the file: frames resolve as they are read) ---- */

struct read_module {
    const char *name; /* in the buffer */
    int handle;       /* symbolizer handle, -1: no debug information */
};

struct raw_module {
    const char *name, *path, *build_id;
    uint64_t vaddr_base;
};

#define SNAP_MODULE_SCHEMA(X) /* modules[] (snapshot.h's tables, for this struct) */ \
    X(raw_module, name, name, RAWN, 0)                                              \
    X(raw_module, path, path, RAWN, 0)                                              \
    X(raw_module, build_id, build_id, RAWN, 0)                                      \
    X(raw_module, vaddr_base, vaddr_base, U64N, 0)
static const struct field module_fields[] = {SNAP_MODULE_SCHEMA(SCHEMA_FIELD)};

int snapshot_bulk_module(struct reader *r, void *obj, size_t i)
{
    (void)obj;
    (void)i;
    struct raw_module m = {NULL, NULL, NULL, 0};
    int rc = reader_object(r, &m, module_fields, NFIELDS(module_fields));
    if (rc != 0)
        return rc;
    if (m.name == NULL)
        return reader_invalid(r, "has no \"name\"");
    if (m.vaddr_base == SNAP_UNKNOWN)
        m.vaddr_base = 0;
    if (snapshot_vec_reserve((void **)&r->mods, &r->mods_cap, sizeof *r->mods, r->nmods + 1))
        return reader_nomem(r);
    r->mods[r->nmods].name = m.name;
    r->mods[r->nmods].handle =
        symbolizer_module(r->ctx->sym, m.name, m.path, m.build_id, m.vaddr_base);
    r->nmods++;
    return 0;
}

static int module_handle(const struct reader *r, const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < r->nmods; i++)
        if (strcmp(r->mods[i].name, name) == 0)
            return r->mods[i].handle;
    return -1;
}

/* Names a native frame from debug information: one frame per inlined call
 * level.  Returns how many frame indices went to out (0: keep the record's
 * own naming), or -1 when out of memory. */
static int source_frames(struct reader *r, const char *module, uint64_t offset,
                         uint32_t *out, size_t max)
{
    int h = module_handle(r, module);
    if (h < 0 || offset == SNAP_UNKNOWN)
        return 0;
    struct src_frame sf[SYMBOLIZE_MAX_INLINE];
    size_t n = symbolizer_lookup(r->ctx->sym, h, offset, sf,
                                 max < SYMBOLIZE_MAX_INLINE ? max : SYMBOLIZE_MAX_INLINE);
    for (size_t k = 0; k < n; k++) {
        out[k] = frames_source(r->ctx, module, sf[k].function, sf[k].file, sf[k].line,
                               sf[k].inlined);
        if (out[k] == FRAMES_NONE)
            return -1;
    }
    return (int)n;
}

struct raw_frame {
    const char *module, *symbol, *file, *function, *marker;
    uint64_t offset;
    int64_t line;
};

#define SNAP_FRAME_SCHEMA(X) /* stacks[].frames[]: native, Python or marker */ \
    X(raw_frame, module, module, RAWN, 0)                                      \
    X(raw_frame, offset, offset, U64N, 0)                                      \
    X(raw_frame, symbol, symbol, RAWN, 0)                                      \
    X(raw_frame, file, file, RAWN, 0)                                          \
    X(raw_frame, line, line, I64N, 0)                                          \
    X(raw_frame, function, function, RAWN, 0)                                  \
    X(raw_frame, marker, marker, RAWN, 0)
static const struct field frame_fields[] = {SNAP_FRAME_SCHEMA(SCHEMA_FIELD)};

/* Reads the frame object at the cursor into *idx (a frame index, or
 * EXPANDED and a run in r->expand): 0 or the error code. */
static int parse_frame(struct reader *r, uint32_t *out)
{
    struct raw_frame f = {NULL, NULL, NULL, NULL, NULL, SNAP_UNKNOWN, SNAP_UNKNOWN_I64};
    int rc = reader_object(r, &f, frame_fields, NFIELDS(frame_fields));
    if (rc != 0)
        return rc;
    /* Most frames repeat (every stack shares its library frames): look the
     * raw bytes up first, and name a frame only the first time. */
    size_t klen = 0;
    const char *parts[5] = {f.module, f.symbol, f.file, f.function, f.marker};
    size_t need = 2 * sizeof(uint64_t); /* offset, line */
    for (int k = 0; k < 5; k++)
        need += 2 + (parts[k] ? strlen(parts[k]) : 0); /* flag, bytes, NUL */
    if (snapshot_vec_reserve((void **)&r->key, &r->key_cap, 1, need))
        return reader_nomem(r);
    for (int k = 0; k < 5; k++) {
        size_t len = parts[k] ? strlen(parts[k]) : 0;
        r->key[klen++] = parts[k] ? 1 : 0; /* null and "" differ */
        if (len > 0)
            memcpy(r->key + klen, parts[k], len);
        klen += len;
        r->key[klen++] = '\0';
    }
    /* The offset is part of the key even with a symbol: debug information
     * names each line of a function apart. */
    uint64_t off = f.offset;
    memcpy(r->key + klen, &off, sizeof off);
    klen += sizeof off;
    memcpy(r->key + klen, &f.line, sizeof f.line);
    klen += sizeof f.line;
    uint32_t idx;
    if (hmap_find(&r->raw_frames, r->key, klen, &idx)) {
        *out = idx;
        return 0;
    }
    if (f.marker != NULL)
        idx = frames_marker(r->ctx, f.marker);
    else if (f.file != NULL || f.function != NULL)
        idx = frames_python(r->ctx, f.file, f.line == SNAP_UNKNOWN_I64 ? -1 : f.line,
                            f.function);
    else {
        uint32_t src[SYMBOLIZE_MAX_INLINE];
        int k = source_frames(r, f.module, f.offset, src, SYMBOLIZE_MAX_INLINE);
        if (k < 0)
            return reader_nomem(r);
        if (k == 1) {
            idx = src[0];
        } else if (k > 1) {
            /* An inlined call chain: the key maps to a run in r->expand. */
            if (snapshot_vec_reserve((void **)&r->expand, &r->expand_cap, sizeof *r->expand,
                                     r->nexpand + (size_t)k + 1))
                return reader_nomem(r);
            idx = EXPANDED | (uint32_t)r->nexpand;
            r->expand[r->nexpand++] = (uint32_t)k;
            memcpy(r->expand + r->nexpand, src, (size_t)k * sizeof *src);
            r->nexpand += (size_t)k;
        } else {
            idx = frames_native(r->ctx, f.module, f.offset == SNAP_UNKNOWN ? 0 : f.offset,
                                f.symbol);
        }
    }
    if (idx == FRAMES_NONE)
        return reader_nomem(r);
    uint32_t got;
    if (hmap_get_or_add(&r->raw_frames, r->key, klen, idx, &got, NULL))
        return reader_nomem(r);
    *out = idx;
    return 0;
}

/* Appends frame index idx (or the run it stands for) to the stack being
 * read. */
static int add_frame(struct reader *r, size_t *n, uint32_t idx)
{
    const uint32_t *run = &idx;
    size_t len = 1;
    if (idx != FRAMES_NONE && (idx & EXPANDED)) {
        run = r->expand + (idx & ~EXPANDED) + 1;
        len = r->expand[idx & ~EXPANDED];
    }
    if (*n + len > r->tmp_cap &&
        snapshot_vec_reserve((void **)&r->tmp, &r->tmp_cap, sizeof *r->tmp, *n + len))
        return reader_nomem(r);
    for (size_t k = 0; k < len; k++)
        r->tmp[*n + k] = run[k];
    *n += len;
    return 0;
}

/* The frames array of one stack into r->tmp (*n entries; an inlined chain
 * makes one recorded frame several).  Most frames are byte for byte a
 * frame met before: their bytes are found and hashed in one pass and
 * looked up before anything is parsed; a frame met for the first time is
 * parsed, and remembered when the parse read exactly those bytes (a '}'
 * inside a string makes the candidate too short). */
static int rd_frame_list(struct reader *r, size_t *n)
{
    int rc = json_enter_array(&r->c);
    if (rc != JSON_OK)
        return reader_bad_value(r, rc, "an array");
    size_t i = 0;
    while ((rc = json_next_element(&r->c)) == 1) {
        const char *span = lane_ws(r->c.p);
        uint64_t h;
        size_t slen = lane_object_hash(span, r->c.end, &h);
        uint32_t idx, got;
        if (slen > 0 && hmap_find_hashed(&r->frame_bytes, span, slen, h, &idx)) {
            r->c.p = (char *)span + slen;
        } else {
            r->c.p = (char *)span;
            reader_push_index(r, i);
            rc = parse_frame(r, &idx);
            reader_pop(r);
            if (rc != 0)
                return rc;
            if (slen > 0 && r->c.p == span + slen &&
                hmap_get_or_add_hashed(&r->frame_bytes, span, slen, h, idx, &got, NULL))
                return reader_nomem(r);
        }
        if ((rc = add_frame(r, n, idx)) != 0)
            return rc;
        if (r->release_at != NULL && r->c.p >= r->release_at)
            reader_release(r);
        i++;
    }
    return rc < 0 ? reader_json_failed(r) : 0;
}

static int rd_frames(struct reader *r, void *obj)
{
    struct snap_stack *st = obj;
    size_t n = 0;
    if (!reader_take_null(r)) {
        int rc = rd_frame_list(r, &n);
        if (rc != 0)
            return rc;
    }
    if (n > UINT32_MAX)
        return reader_invalid(r, "has too many frames");
    st->unfocused = !frame_filter_focused(r->ctx, r->tmp, n);
    n = frame_filter_apply(r->ctx, r->tmp, n);
    st->nframes = (uint32_t)n;
    st->frames = arena_alloc(&r->ctx->arena, (n ? n : 1) * sizeof *st->frames);
    if (st->frames == NULL)
        return reader_nomem(r);
    if (n > 0)
        memcpy(st->frames, r->tmp, n * sizeof *st->frames);
    return 0;
}

static const struct field stack_fields[] = {SNAP_STACK_SCHEMA(SCHEMA_FIELD)};

int snapshot_bulk_stack(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snapshot *s = obj;
    struct snap_stack *st = READER_APPEND(r, s->stacks, s->nstacks, s->stacks_cap);
    if (st == NULL)
        return CLI_ENOMEM;
    st->id = -1;
    for (int b = 0; b < BY_COUNT; b++)
        st->site[b] = FRAMES_NONE;
    int rc = reader_object(r, st, stack_fields, NFIELDS(stack_fields));
    if (rc != 0)
        return rc;
    if (st->id < 1)
        return reader_invalid(r, "has no \"id\" of 1 or more");
    if (st->entry == NULL)
        st->entry = snapshot_intern(r->ctx, "[unknown entry point]", 21);
    if (st->entry == NULL)
        return reader_nomem(r);
    if (st->frames == NULL) { /* no "frames": nothing can match --focus */
        st->unfocused = !frame_filter_focused(r->ctx, NULL, 0);
        st->frames = arena_alloc(&r->ctx->arena, sizeof *st->frames);
        if (st->frames == NULL)
            return reader_nomem(r);
    }
    s->nstacks++;
    return 0;
}
