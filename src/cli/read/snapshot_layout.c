/* snapshot_layout.c - oom.layout: where this process's live allocations sat
 * on the failing device, and the gaps between them. */
#include "snapshot_layout.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const struct field range_fields[] = {SNAP_RANGE_SCHEMA(SCHEMA_FIELD)};

/* A range appended to *v (n, cap beside it): an allocation or a gap. */
static int rd_range(struct reader *r, struct snap_range **v, size_t *n, size_t *cap)
{
    struct snap_range *e = reader_append(r, (void **)v, *n, cap, sizeof **v);
    if (e == NULL)
        return CLI_ENOMEM;
    e->kind = KIND_DEVICE;
    e->stack = SNAP_NO_STACK;
    int rc = reader_object(r, e, range_fields, NFIELDS(range_fields));
    if (e->stack_id == SNAP_UNKNOWN_I64)
        e->stack_id = 0;
    if (rc == 0)
        (*n)++;
    return rc;
}

static int rd_allocation(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_layout *l = obj;
    return rd_range(r, &l->allocations, &l->nallocations, &l->allocations_cap);
}

static int rd_gap(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_layout *l = obj;
    return rd_range(r, &l->gaps, &l->ngaps, &l->gaps_cap);
}

static const struct field best_fields[] = {SNAP_BEST_FREE_SCHEMA(SCHEMA_FIELD)};

static int rd_best_free(struct reader *r, void *obj)
{
    struct snap_layout *l = obj;
    if (reader_take_null(r))
        return 0;
    l->has_best_free = true;
    int rc = reader_object(r, l, best_fields, NFIELDS(best_fields));
    if (l->best_free.stack_id == SNAP_UNKNOWN_I64)
        l->best_free.stack_id = 0;
    return rc;
}

/* ---- allocator_segments ---- */

static int rd_block_field(struct reader *r, void *obj, size_t i)
{
    struct snap_block *b = obj;
    if (i == 0)
        return reader_u64(r, &b->offset, false);
    if (i == 1)
        return reader_u64(r, &b->bytes, false);
    if (i == 2) {
        const char *st;
        int rc = reader_str(r, &st, false);
        if (rc == 0)
            b->state = strcmp(st, "free") == 0        ? BLOCK_FREE
                       : strcmp(st, "allocated") == 0 ? BLOCK_ALLOCATED
                       : strcmp(st, "pending") == 0   ? BLOCK_PENDING
                                                      : BLOCK_UNKNOWN;
        return rc;
    }
    if (i == 3) {
        uint64_t k;
        int rc = reader_u64(r, &k, false);
        if (rc == 0)
            b->pystack = k < SNAP_NO_STACK ? (uint32_t)k : SNAP_NO_STACK - 1; /* checked */
        return rc;
    }
    return json_skip(&r->c) == JSON_OK ? 0 : reader_json_failed(r);
}

/* A segment is filled here, its layout beside it: reading its blocks may
 * move l->segments. */
struct seg_read {
    struct snap_segment seg;
    struct snap_layout *l;
};
#define SNAP_SEGMENT_SCHEMA(X) /* allocator_segments.segments[] */ \
    X(seg_read, address, seg.address, STRN, 0)                    \
    X(seg_read, bytes, seg.bytes, U64, 0)                         \
    X(seg_read, pool, rd_seg_pool, FN, 0)                         \
    X(seg_read, blocks, rd_block, LIST, 0)

static int rd_block(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct seg_read *c = obj;
    struct snap_layout *l = c->l;
    struct snap_block *b = READER_APPEND(r, l->blocks, l->nblocks, l->blocks_cap);
    if (b == NULL)
        return CLI_ENOMEM;
    b->state = BLOCK_UNKNOWN;
    b->pystack = SNAP_NO_STACK;
    int rc = reader_array(r, b, rd_block_field);
    if (rc == 0) {
        l->nblocks++;
        c->seg.nblocks++;
    }
    return rc;
}

static int rd_seg_pool(struct reader *r, void *obj)
{
    struct seg_read *c = obj;
    const char *p;
    int rc = reader_str(r, &p, true);
    if (rc == 0 && p != NULL)
        c->seg.small = strcmp(p, "small") == 0;
    return rc;
}

static const struct field segment_fields[] = {SNAP_SEGMENT_SCHEMA(SCHEMA_FIELD)};

static int rd_segment(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_layout *l = obj;
    struct seg_read c = {.seg = {.first = l->nblocks}, .l = l};
    int rc = reader_object(r, &c, segment_fields, NFIELDS(segment_fields));
    if (rc == 0) {
        if (snapshot_vec_reserve((void **)&l->segments, &l->segments_cap,
                                 sizeof *l->segments, l->nsegments + 1))
            return reader_nomem(r);
        l->segments[l->nsegments++] = c.seg;
    }
    return rc;
}

static const struct field pyframe_fields[] = {SNAP_SEG_FRAME_SCHEMA(SCHEMA_FIELD)};

static int rd_pyframe(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_layout *l = obj;
    struct snap_pyframe *f = READER_APPEND(r, l->pyframes, l->npyframes, l->pyframes_cap);
    if (f == NULL)
        return CLI_ENOMEM;
    *f = (struct snap_pyframe){"?", "?", 0};
    int rc = reader_object(r, f, pyframe_fields, NFIELDS(pyframe_fields));
    if (rc == 0) {
        l->npyframes++;
        l->pystacks[l->npystacks - 1].n++;
    }
    return rc;
}

static int rd_pystack(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_layout *l = obj;
    if (snapshot_vec_reserve((void **)&l->pystacks, &l->pystacks_cap, sizeof *l->pystacks,
                             l->npystacks + 1))
        return reader_nomem(r);
    l->pystacks[l->npystacks++] = (struct snap_pystack){l->npyframes, 0};
    return reader_array(r, l, rd_pyframe);
}

static const struct field segments_fields[] = {SNAP_SEGMENTS_SCHEMA(SCHEMA_FIELD)};

static int rd_allocator_segments(struct reader *r, void *obj)
{
    struct snap_layout *l = obj;
    if (reader_take_null(r))
        return 0;
    l->has_segments = true;
    return reader_object(r, l, segments_fields, NFIELDS(segments_fields));
}

int snapshot_read_device_segments(struct reader *r, void *obj)
{
    return rd_allocator_segments(r, &((struct snap_device *)obj)->segments);
}

static const struct field layout_fields[] = {SNAP_LAYOUT_SCHEMA(SCHEMA_FIELD)};

int snapshot_read_layout(struct reader *r, void *obj)
{
    struct snap_layout *l = &((struct snap_oom *)obj)->layout;
    l->best_free.stack = SNAP_NO_STACK;
    if (reader_take_null(r))
        return 0;
    l->present = true;
    return reader_object(r, l, layout_fields, NFIELDS(layout_fields));
}

/* ---- checks ---- */


static int resolve(struct snapshot *s, struct cli_error *err, struct snap_range *e,
                   const char *where, size_t i)
{
    if (e->stack_id == 0)
        return 0;
    e->stack = snapshot_stack_index(s, e->stack_id);
    if (e->stack != SNAP_NO_STACK)
        return 0;
    return errors_set(err, CLI_EBADREF,
                      "cannot read snapshot '%s': oom.layout.%s[%zu] refers to stack "
                      "%lld, which \"stacks\" does not define",
                      s->file, where, i, (long long)e->stack_id);
}

/* a + b <= c without overflow */
static bool fits(uint64_t a, uint64_t b, uint64_t c)
{
    return a <= c && b <= c - a;
}

static int check_ranges(const struct snapshot *s, struct cli_error *err,
                        const struct snap_layout *l)
{
    for (size_t i = 0; i < l->nallocations; i++) {
        const struct snap_range *e = &l->allocations[i];
        if (!fits(e->offset, e->bytes, l->span_bytes) ||
            (i > 0 && !fits(l->allocations[i - 1].offset, l->allocations[i - 1].bytes,
                            e->offset)))
            return snapshot_broken(s, err, "layout: allocations in address order, inside the span",
                          "oom.layout.allocations[%zu] at offset %" PRIu64 " (%" PRIu64
                          " bytes) in a span of %" PRIu64, i, e->offset, e->bytes,
                          l->span_bytes);
    }
    uint64_t listed = 0, at_least = 0;
    for (size_t i = 0; i < l->ngaps; i++) {
        const struct snap_range *g = &l->gaps[i];
        if (g->bytes == 0 || !fits(g->offset, g->bytes, l->span_bytes) ||
            (i > 0 && g->bytes > l->gaps[i - 1].bytes))
            return snapshot_broken(s, err, "layout: gaps largest first, inside the span",
                          "oom.layout.gaps[%zu] at offset %" PRIu64 " (%" PRIu64
                          " bytes) in a span of %" PRIu64, i, g->offset, g->bytes,
                          l->span_bytes);
        listed += g->bytes;
        at_least += g->bytes >= s->oom.requested_bytes;
    }
    uint64_t largest = l->ngaps > 0 ? l->gaps[0].bytes : 0;
    if (l->ngaps > l->gap_count || listed > l->gap_bytes || largest != l->largest_gap_bytes)
        return snapshot_broken(s, err, "layout: the gaps listed are the largest of gap_count",
                      "%zu gaps of %" PRIu64 " bytes listed, the largest %" PRIu64
                      "; gap_count %" PRIu64 ", gap_bytes %" PRIu64
                      ", largest_gap_bytes %" PRIu64, l->ngaps, listed, largest,
                      l->gap_count, l->gap_bytes, l->largest_gap_bytes);
    if (l->gaps_at_least_request < at_least || l->gaps_at_least_request > l->gap_count ||
        (l->gaps_at_least_request > 0) != (largest >= s->oom.requested_bytes && largest > 0))
        return snapshot_broken(s, err, "layout: gaps_at_least_request counts the gaps >= the request",
                      "gaps_at_least_request %" PRIu64 ", largest gap %" PRIu64
                      ", request %" PRIu64, l->gaps_at_least_request, largest,
                      s->oom.requested_bytes);
    return 0;
}

/* where: "oom.layout" or "devices[N]" */
static int check_segments(const struct snapshot *s, struct cli_error *err,
                          const struct snap_layout *l, const char *where)
{
    if (l->nsegments > l->segments_count || l->nblocks > l->blocks_count)
        return snapshot_broken(s, err, "layout: allocator segments listed <= their counts",
                      "%s.allocator_segments: %zu segments and %zu blocks listed, count %"
                      PRIu64 ", blocks %" PRIu64, where, l->nsegments, l->nblocks,
                      l->segments_count, l->blocks_count);
    for (size_t i = 0; i < l->nsegments; i++) {
        const struct snap_segment *g = &l->segments[i];
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct snap_block *b = &l->blocks[g->first + k];
            if (!fits(b->offset, b->bytes, g->bytes) ||
                (k > 0 && !fits(b[-1].offset, b[-1].bytes, b->offset)))
                return snapshot_broken(s, err, "layout: blocks in order, inside their segment",
                              "%s.allocator_segments.segments[%zu].blocks[%zu] at "
                              "offset %" PRIu64 " (%" PRIu64 " bytes) in a segment of %"
                              PRIu64, where, i, k, b->offset, b->bytes, g->bytes);
            if (b->pystack != SNAP_NO_STACK && b->pystack >= l->npystacks)
                return snapshot_broken(s, err, "layout: a block's stack is one of stacks",
                              "%s.allocator_segments.segments[%zu].blocks[%zu] names stack %"
                              PRIu32 " of %zu", where, i, k, b->pystack, l->npystacks);
        }
    }
    return 0;
}

int snapshot_layout_check(struct snapshot *s, struct cli_error *err)
{
    for (size_t i = 0; i < s->ndevices; i++) {
        char where[48];
        snprintf(where, sizeof where, "devices[%zu]", i);
        if (s->devices[i].segments.has_segments &&
            check_segments(s, err, &s->devices[i].segments, where))
            return err->code;
    }
    struct snap_layout *l = &s->oom.layout;
    if (!s->oom.present || !l->present)
        return 0;
    for (size_t i = 0; i < l->nallocations; i++)
        if (resolve(s, err, &l->allocations[i], "allocations", i))
            return err->code;
    if (l->has_best_free && resolve(s, err, &l->best_free, "best_free", 0))
        return err->code;
    if (l->nallocations > l->count ||
        (l->count > 0 && (l->base == NULL || l->nallocations == 0)))
        return snapshot_broken(s, err, "layout: count >= the allocations listed, at least one",
                      "oom.layout.count %" PRIu64 ", %zu allocations listed", l->count,
                      l->nallocations);
    if (l->bytes > l->span_bytes || l->span_bytes - l->bytes != l->gap_bytes)
        return snapshot_broken(s, err, "layout: bytes + gap_bytes = span_bytes",
                      "oom.layout.bytes %" PRIu64 ", gap_bytes %" PRIu64
                      ", span_bytes %" PRIu64, l->bytes, l->gap_bytes, l->span_bytes);
    int rc = check_ranges(s, err, l);
    if (rc == 0 && l->has_segments)
        rc = check_segments(s, err, l, "oom.layout");
    if (rc == 0 && l->has_best_free &&
        (!fits(l->best_free.offset, l->best_free.bytes, l->span_bytes) ||
         l->best_free_hole_bytes < l->best_free.bytes ||
         l->best_free_hole_bytes - l->best_free.bytes > 2 * l->largest_gap_bytes))
        return snapshot_broken(s, err, "layout: best_free is an allocation and its gaps",
                      "best_free at offset %" PRIu64 " (%" PRIu64 " bytes), hole_bytes %"
                      PRIu64, l->best_free.offset, l->best_free.bytes,
                      l->best_free_hole_bytes);
    return rc;
}
