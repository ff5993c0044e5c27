/* html_tensors.c - PyTorch's own figures in the HTML page's model: its
 * tensors' peak (max_memory_allocated) beside each device's peak, which
 * counts what it reserved, and its live tensors by the Python line that
 * allocated them (top_tensors, from its allocation history), drawn by
 * html/tensors.js. */
#include "html.h"

void html_tensors_write(struct json_out *w, const struct snap_allocator *a, uint64_t peak)
{
    json_out_key(w, "tensors");
    if (a == NULL || !a->present) {
        json_out_null(w);
        return;
    }
    json_out_begin_object(w);
    json_out_key(w, "peak_allocated");
    json_out_u64(w, peak);
    json_out_key(w, "allocated");
    json_out_u64(w, a->allocated_bytes);
    json_out_key(w, "reserved");
    json_out_u64(w, a->reserved_bytes);
    /* [[where ("file:line:function < ..."; "" without a Python stack),
     * bytes, count]], largest first; null when the history was off */
    json_out_key(w, "top");
    if (!a->has_top) {
        json_out_null(w);
    } else {
        json_out_begin_array(w);
        for (size_t i = 0; i < a->ntop; i++) {
            json_out_begin_array(w);
            json_out_string(w, a->top[i].where ? a->top[i].where : "");
            json_out_u64(w, a->top[i].bytes);
            json_out_u64(w, a->top[i].count);
            json_out_end_array(w);
        }
        json_out_end_array(w);
    }
    json_out_end_object(w);
}
