/* html_phases.c - the program's phases in the HTML page's model: the
 * ranges drawn under each device's timeline (html/timeline.js), named by
 * path.  Bounded by what the snapshot keeps (PHASE_RING closed ranges and
 * the open ones, at most 16384 paths). */
#include "html.h"

#include "snapshot_phases.h"

void html_phases_write(struct jsonw *w, const struct snapshot *s)
{
    const struct snap_phases *ph = &s->phases;
    jsonw_key(w, "ranges");
    if (!ph->present || ph->nspans == 0) {
        jsonw_null(w);
        return;
    }
    int64_t top = 0;
    for (size_t i = 0; i < ph->n; i++)
        if (ph->v[i].id > top)
            top = ph->v[i].id;
    jsonw_begin_object(w);
    jsonw_key(w, "paths");
    jsonw_begin_array(w);
    jsonw_string(w, "");
    for (int64_t id = 1; id <= top; id++)
        jsonw_string(w, snapshot_phase(s, id) ? snapshot_phase_path(s, id) : "?");
    jsonw_end_array(w);
    jsonw_key(w, "spans");
    jsonw_begin_array(w);
    for (size_t i = 0; i < ph->nspans; i++) {
        const struct snap_span *sp = &ph->spans[i];
        jsonw_begin_array(w);
        jsonw_i64(w, sp->start_ns);
        jsonw_i64(w, sp->end_ns); /* null: open at the dump */
        jsonw_i64(w, sp->thread);
        jsonw_i64(w, sp->phase >= 0 && sp->phase <= top ? sp->phase : 0);
        jsonw_i64(w, sp->kind);
        jsonw_end_array(w);
    }
    jsonw_end_array(w);
    jsonw_end_object(w);
}
