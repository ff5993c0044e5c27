/* html_phases.c - the program's phases in the HTML page's model: the
 * ranges drawn under each device's timeline (html/timeline.js), named by
 * path.  Bounded by what the snapshot keeps (PHASE_RING closed ranges and
 * the open ones, at most 16384 paths). */
#include "html.h"

#include "snapshot_phases.h"

void html_phases_write(struct json_out *w, const struct snapshot *s)
{
    const struct snap_phases *ph = &s->phases;
    json_out_key(w, "ranges");
    if (!ph->present || ph->nspans == 0) {
        json_out_null(w);
        return;
    }
    int64_t top = 0;
    for (size_t i = 0; i < ph->n; i++)
        if (ph->v[i].id > top)
            top = ph->v[i].id;
    json_out_begin_object(w);
    json_out_key(w, "paths");
    json_out_begin_array(w);
    json_out_string(w, "");
    for (int64_t id = 1; id <= top; id++)
        json_out_string(w, snapshot_phase(s, id) ? snapshot_phase_path(s, id) : "?");
    json_out_end_array(w);
    json_out_key(w, "spans");
    json_out_begin_array(w);
    for (size_t i = 0; i < ph->nspans; i++) {
        const struct snap_span *sp = &ph->spans[i];
        json_out_begin_array(w);
        json_out_i64(w, sp->start_ns);
        json_out_i64(w, sp->end_ns); /* null: open at the dump */
        json_out_i64(w, sp->thread);
        json_out_i64(w, sp->phase >= 0 && sp->phase <= top ? sp->phase : 0);
        json_out_i64(w, sp->kind);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
}
