/* html_tensors.c - PyTorch's own figures in the HTML page's model: its
 * tensors' peak (max_memory_allocated) beside each device's peak, which
 * counts what it reserved, and its live tensors by the Python line that
 * allocated them (top_tensors, from its allocation history), drawn by
 * html/tensors.js. */
#include "html.h"

void html_tensors_write(struct jsonw *w, const struct snap_allocator *a, uint64_t peak)
{
    jsonw_key(w, "tensors");
    if (a == NULL || !a->present) {
        jsonw_null(w);
        return;
    }
    jsonw_begin_object(w);
    jsonw_key(w, "peak_allocated");
    jsonw_u64(w, peak);
    jsonw_key(w, "allocated");
    jsonw_u64(w, a->allocated_bytes);
    jsonw_key(w, "reserved");
    jsonw_u64(w, a->reserved_bytes);
    /* [[where ("file:line:function < ..."; "" without a Python stack),
     * bytes, count]], largest first; null when the history was off */
    jsonw_key(w, "top");
    if (!a->has_top) {
        jsonw_null(w);
    } else {
        jsonw_begin_array(w);
        for (size_t i = 0; i < a->ntop; i++) {
            jsonw_begin_array(w);
            jsonw_string(w, a->top[i].where ? a->top[i].where : "");
            jsonw_u64(w, a->top[i].bytes);
            jsonw_u64(w, a->top[i].count);
            jsonw_end_array(w);
        }
        jsonw_end_array(w);
    }
    jsonw_end_object(w);
}
