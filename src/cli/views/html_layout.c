/* html_layout.c - the page model's view of oom.layout (see html.h): numbers
 * as the snapshot has them, stacks as indices into the model's stacks, so
 * the page draws each listed allocation at its offset in its site's colour. */
#include "html.h"

static void write_stack(struct jsonw *w, uint32_t stack)
{
    if (stack == SNAP_NO_STACK)
        jsonw_i64(w, -1);
    else
        jsonw_u64(w, stack);
}

/* The caching allocator's segments: {count, blocks, list: [[address, bytes,
 * small, [[offset, bytes, state]...]]]}, state 0 free, 1 allocated,
 * 2 pending, 3 unknown; null when it did not report them. */
static void write_segments(struct jsonw *w, const struct snap_layout *l)
{
    if (!l->has_segments) {
        jsonw_null(w);
        return;
    }
    jsonw_begin_object(w);
    jsonw_key(w, "count");
    jsonw_u64(w, l->segments_count);
    jsonw_key(w, "blocks");
    jsonw_u64(w, l->blocks_count);
    jsonw_key(w, "list");
    jsonw_begin_array(w);
    for (size_t i = 0; i < l->nsegments; i++) {
        const struct snap_segment *g = &l->segments[i];
        jsonw_begin_array(w);
        jsonw_string(w, g->address);
        jsonw_u64(w, g->bytes);
        jsonw_u64(w, g->small);
        jsonw_begin_array(w);
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct snap_block *b = &l->blocks[g->first + k];
            jsonw_begin_array(w);
            jsonw_u64(w, b->offset);
            jsonw_u64(w, b->bytes);
            jsonw_u64(w, b->state);
            jsonw_end_array(w);
        }
        jsonw_end_array(w);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
    jsonw_end_object(w);
}

void html_layout_write(struct jsonw *w, const struct snap_oom *o)
{
    const struct snap_layout *l = &o->layout;
    jsonw_key(w, "layout");
    if (!l->present) {
        jsonw_null(w);
        return;
    }
    jsonw_begin_object(w);
    jsonw_key(w, "base");
    jsonw_string(w, l->base);
    static const char *const keys[] = {"span", "count", "bytes", "gap_count", "gap_bytes",
                                       "largest_gap", "fit"};
    const uint64_t vals[] = {l->span_bytes, l->count, l->bytes, l->gap_count, l->gap_bytes,
                             l->largest_gap_bytes, l->gaps_at_least_request};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        jsonw_key(w, keys[i]);
        jsonw_u64(w, vals[i]);
    }
    jsonw_key(w, "allocs");
    jsonw_begin_array(w);
    for (size_t i = 0; i < l->nallocations; i++) {
        jsonw_begin_array(w);
        jsonw_u64(w, l->allocations[i].offset);
        jsonw_u64(w, l->allocations[i].bytes);
        write_stack(w, l->allocations[i].stack);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
    jsonw_key(w, "gaps");
    jsonw_begin_array(w);
    for (size_t i = 0; i < l->ngaps; i++) {
        jsonw_begin_array(w);
        jsonw_u64(w, l->gaps[i].offset);
        jsonw_u64(w, l->gaps[i].bytes);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
    jsonw_key(w, "segments");
    write_segments(w, l);
    jsonw_key(w, "best");
    if (l->has_best_free) {
        jsonw_begin_array(w);
        jsonw_u64(w, l->best_free.offset);
        jsonw_u64(w, l->best_free.bytes);
        jsonw_u64(w, l->best_free_hole_bytes);
        jsonw_end_array(w);
    } else {
        jsonw_null(w);
    }
    jsonw_end_object(w);
}
