/* html_layout.c - the page model's view of oom.layout (see html.h): numbers
 * as the snapshot has them, stacks as indices into the model's stacks, so
 * the page draws each listed allocation at its offset in its site's colour. */
#include "html.h"

/* The caching allocator's segments: {count, blocks, list: [[address, bytes,
 * small, [[offset, bytes, state]...]]]}, state 0 free, 1 allocated,
 * 2 pending, 3 unknown; null when it did not report them. */
static void write_segments(struct json_out *w, const struct snap_layout *l)
{
    if (!l->has_segments) {
        json_out_null(w);
        return;
    }
    json_out_begin_object(w);
    json_out_key_u64(w, "count", l->segments_count);
    json_out_key_u64(w, "blocks", l->blocks_count);
    json_out_key(w, "list");
    json_out_begin_array(w);
    for (size_t i = 0; i < l->nsegments; i++) {
        const struct snap_segment *g = &l->segments[i];
        json_out_begin_array(w);
        json_out_string(w, g->address);
        json_out_u64(w, g->bytes);
        json_out_u64(w, g->small);
        json_out_begin_array(w);
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct snap_block *b = &l->blocks[g->first + k];
            json_out_begin_array(w);
            json_out_u64(w, b->offset);
            json_out_u64(w, b->bytes);
            json_out_u64(w, b->state);
            json_out_end_array(w);
        }
        json_out_end_array(w);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
}

void html_layout_write(struct json_out *w, const struct snap_oom *o)
{
    const struct snap_layout *l = &o->layout;
    json_out_key(w, "layout");
    if (!l->present) {
        json_out_null(w);
        return;
    }
    json_out_begin_object(w);
    json_out_key_string(w, "base", l->base);
    static const char *const keys[] = {"span", "count", "bytes", "gap_count", "gap_bytes",
                                       "largest_gap", "fit"};
    const uint64_t vals[] = {l->span_bytes, l->count, l->bytes, l->gap_count, l->gap_bytes,
                             l->largest_gap_bytes, l->gaps_at_least_request};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        json_out_key_u64(w, keys[i], vals[i]);
    json_out_key(w, "allocs");
    json_out_begin_array(w);
    for (size_t i = 0; i < l->nallocations; i++) {
        json_out_begin_array(w);
        json_out_u64(w, l->allocations[i].offset);
        json_out_u64(w, l->allocations[i].bytes);
        html_stack_ref(w, l->allocations[i].stack);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_key(w, "gaps");
    json_out_begin_array(w);
    for (size_t i = 0; i < l->ngaps; i++) {
        json_out_begin_array(w);
        json_out_u64(w, l->gaps[i].offset);
        json_out_u64(w, l->gaps[i].bytes);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_key(w, "segments");
    write_segments(w, l);
    json_out_key_u64s(w, "best", l->has_best_free, NULL,
                      (uint64_t[3]){l->best_free.offset, l->best_free.bytes,
                                    l->best_free_hole_bytes}, 3);
    json_out_end_object(w);
}
