/* timeline_phases.c - the program's phases on the timeline
 * (docs/snapshot-format.md "phases", phases.ranges), as Nsight Systems draws
 * NVTX ranges: Chrome events and text bands as docs/cli.md's `timeline`
 * section describes them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "snapshot_phases.h"
#include "timeline.h"

#define BANDS 8

static void args(struct json_out *w, const struct snapshot *s, const struct snap_span *sp,
                 bool open)
{
    const struct snap_phase *p = snapshot_phase(s, sp->phase);
    json_out_key(w, "args");
    json_out_begin_object(w);
    json_out_key_string(w, "path", snapshot_phase_path(s, sp->phase));
    json_out_key_string(w, "source", p ? p->source : NULL);
    if (p != NULL && p->domain != NULL) {
        json_out_key_string(w, "domain", p->domain);
    }
    if (open) {
        json_out_key_bool(w, "open", true);
    }
    json_out_end_object(w);
}

void timeline_phase_slices(struct json_out *w, const struct snapshot *s, int64_t pid)
{
    int64_t dump = s->process.dump_time_ns;
    for (size_t i = 0; i < s->phases.nspans; i++) {
        const struct snap_span *sp = &s->phases.spans[i];
        const struct snap_phase *p = snapshot_phase(s, sp->phase);
        const char *name = p ? p->name : "?";
        int64_t tid = sp->thread != SNAP_UNKNOWN_I64 ? sp->thread : 0;
        bool open = sp->end_ns == SNAP_UNKNOWN_I64;
        int64_t end = open ? (dump != SNAP_UNKNOWN_I64 && dump > sp->start_ns ? dump
                                                                               : sp->start_ns)
                           : sp->end_ns;
        if (sp->kind == SPAN_MARK) {
            timeline_event_head(w, name, "range", "i", pid, tid, sp->start_ns);
            json_out_key_string(w, "s", "t");
            args(w, s, sp, false);
            json_out_end_object(w);
        } else if (sp->kind == SPAN_STARTEND) {
            timeline_event_head(w, name, "range", "b", pid, tid, sp->start_ns);
            json_out_key_u64(w, "id", i + 1);
            args(w, s, sp, open);
            json_out_end_object(w);
            timeline_event_head(w, name, "range", "e", pid, tid, end);
            json_out_key_u64(w, "id", i + 1);
            json_out_end_object(w);
        } else {
            timeline_event_head(w, name, "range", "X", pid, tid, sp->start_ns);
            timeline_time(w, "dur", end - sp->start_ns);
            args(w, s, sp, open);
            json_out_end_object(w);
        }
    }
}

/* ---- text ---- */

static size_t cell_at(int64_t t, int64_t end, size_t cols)
{
    if (t <= 0 || end <= 0)
        return 0;
    size_t c = (size_t)((double)t / (double)end * (double)cols);
    return c >= cols ? cols - 1 : c;
}

void timeline_phase_bands(FILE *f, const struct snapshot *s, int64_t end, size_t cols,
                          bool ascii)
{
    const struct snap_phases *ph = &s->phases;
    if (!ph->present || ph->nspans == 0 || cols == 0)
        return;
    /* the outermost phases, by first start */
    int64_t band_of[BANDS];
    int64_t first[BANDS];
    size_t nbands = 0, more = 0;
    int64_t dump = s->process.dump_time_ns;
    char *cells = malloc(BANDS * cols);
    if (cells == NULL)
        return;
    memset(cells, 0, BANDS * cols);
    for (size_t i = 0; i < ph->nspans; i++) {
        const struct snap_span *sp = &ph->spans[i];
        const struct snap_phase *p = snapshot_phase(s, sp->phase);
        if (sp->kind == SPAN_MARK || p == NULL || p->parent != 0)
            continue;
        size_t b = 0;
        while (b < nbands && band_of[b] != sp->phase)
            b++;
        if (b == nbands) {
            if (nbands == BANDS) {
                more++;
                continue;
            }
            band_of[nbands] = sp->phase;
            first[nbands++] = sp->start_ns;
        } else if (sp->start_ns < first[b]) {
            first[b] = sp->start_ns;
        }
        int64_t stop = sp->end_ns != SNAP_UNKNOWN_I64 ? sp->end_ns
                       : dump != SNAP_UNKNOWN_I64 ? dump : end;
        for (size_t c = cell_at(sp->start_ns, end, cols); c <= cell_at(stop, end, cols); c++)
            cells[b * cols + c] = 1;
    }
    if (nbands == 0) {
        free(cells);
        return;
    }
    /* bands in the order they first opened */
    size_t order[BANDS];
    for (size_t b = 0; b < nbands; b++)
        order[b] = b;
    for (size_t i = 1; i < nbands; i++)
        for (size_t j = i; j > 0 && first[order[j]] < first[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    fprintf(f, "\n%sranges%s (outermost, as the program named them)\n", out_color(OUT_BOLD),
            out_color(OUT_RESET));
    for (size_t k = 0; k < nbands; k++) {
        size_t b = order[k];
        fprintf(f, "%10s |", "");
        for (size_t c = 0; c < cols; c++)
            fputs(cells[b * cols + c] ? (ascii ? "=" : "\u2501") : " ", f);
        fprintf(f, "| %s\n", snapshot_display(s->ctx, snapshot_phase_path(s, band_of[b])));
    }
    if (more > 0)
        fprintf(f, "%10s  (%zu more spans of other outermost ranges; see --format chrome)\n",
                "", more);
    if (ph->recorded != SNAP_UNKNOWN && ph->recorded > ph->nspans)
        fprintf(f, "%10s  the snapshot keeps the latest %zu of %" PRIu64 " ranges\n", "",
                ph->nspans, ph->recorded);
    free(cells);
}
