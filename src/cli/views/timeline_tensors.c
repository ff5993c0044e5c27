/* timeline_tensors.c - PyTorch's tensors by line in the Chrome trace
 * (timeline.h): per device a counter track with a sample at each reading the
 * snapshot holds (docs/cli.md's `timeline` section says which readings, and
 * what each sample sums to).  Between readings the track holds its value:
 * Perfetto draws steps, the truth only at the samples.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "holders.h"
#include "timeline.h"

#define READINGS 3

/* A reading: one of the dump's holders (the peak's, the failure's, the
 * dump's), or one of the layer's readings between dumps (tensor_series). */
struct reading {
    int64_t t_ns;
    struct holders h;
    const struct snap_sreading *x; /* a series reading (h unused), or NULL */
};

static int by_time(const void *a, const void *b)
{
    int64_t x = ((const struct reading *)a)->t_ns, y = ((const struct reading *)b)->t_ns;
    return (x > y) - (x < y);
}

/* What line `name` held at reading r. */
static uint64_t line_bytes(const struct snapshot *s, const struct snap_series *sr,
                           const struct reading *r, const char *name)
{
    uint64_t b = 0;
    if (r->x != NULL) {
        for (size_t j = 0; j < sr->nlines; j++)
            if (strcmp(holders_series_name(s, sr, j, true), name) == 0)
                b += r->x->bytes[j];
        return b;
    }
    for (size_t k = 0; k < r->h.n; k++)
        if (strcmp(r->h.v[k].display, name) == 0)
            b += r->h.v[k].bytes;
    return b;
}

/* The top lines over every reading: names[0..*n), largest first by their
 * largest reading. */
static void pick_lines(const struct snapshot *s, const struct snap_series *sr,
                       struct reading *r, size_t nr, const char **names, size_t top, size_t *n)
{
    *n = 0;
    while (*n < top) {
        const char *best = NULL;
        uint64_t most = 0;
        for (size_t i = 0; i < nr; i++) {
            size_t m = r[i].x ? sr->nlines : r[i].h.n;
            for (size_t k = 0; k < m; k++) {
                const char *name = r[i].x ? holders_series_name(s, sr, k, true)
                                          : r[i].h.v[k].display;
                uint64_t b = r[i].x ? r[i].x->bytes[k] : r[i].h.v[k].bytes;
                bool taken = false;
                for (size_t j = 0; j < *n && !taken; j++)
                    taken = strcmp(names[j], name) == 0;
                if (!taken && (best == NULL || b > most)) {
                    best = name;
                    most = b;
                }
            }
        }
        if (best == NULL)
            return;
        names[(*n)++] = best;
    }
}

static int device_tensors(struct json_out *w, struct snapshot *s, const struct snap_device *d,
                          int64_t pid, unsigned top)
{
    const struct snap_series *sr = &d->tensor_series;
    size_t cap = READINGS + (sr->present ? sr->n : 0), nr = 0;
    struct reading *r = calloc(cap, sizeof *r);
    int rc = -1;
    if (r == NULL)
        return -1;
    int64_t when[READINGS] = {SNAP_UNKNOWN_I64, SNAP_UNKNOWN_I64,
                              s->process.dump_time_ns};
    const struct snap_tensors *pk = holders_tensors(s, d, HOLDERS_PEAK);
    when[0] = pk && pk->present ? pk->time_ns : SNAP_UNKNOWN_I64;
    if (s->oom.present && s->oom.device == d->ordinal)
        when[1] = s->oom.time_ns;
    enum holders_moment m[READINGS] = {HOLDERS_PEAK, HOLDERS_OOM, HOLDERS_NOW};
    for (int i = 0; i < READINGS; i++) {
        if (when[i] == SNAP_UNKNOWN_I64 || !holders_have_tensors(s, i == 1 ? NULL : d, m[i]))
            continue;
        if (holders_get(s, i == 1 ? NULL : d, m[i], false, &r[nr].h) != 0)
            goto out;
        r[nr].t_ns = when[i];
        nr++;
    }
    /* the layer's readings between dumps (not under --segments: they are
     * the tensors' too) */
    for (size_t i = 0; sr->present && !holders_segments() && i < sr->n; i++)
        if (sr->v[i].time_ns != SNAP_UNKNOWN_I64 && nr > 0) {
            r[nr].t_ns = sr->v[i].time_ns;
            r[nr].x = &sr->v[i];
            nr++;
        }
    if (nr == 0) {
        rc = 0;
        goto out;
    }
    rc = -1;
    qsort(r, nr, sizeof *r, by_time);
    const char **names = calloc(top ? top : 1, sizeof *names);
    if (names == NULL)
        goto out;
    size_t n;
    pick_lines(s, sr, r, nr, names, top, &n);
    char tname[64];
    snprintf(tname, sizeof tname, "device %" PRId64 " tensors by line", d->ordinal);
    for (size_t i = 0; i < nr; i++) {
        timeline_event_head(w, tname, NULL, "C", pid, 0, r[i].t_ns);
        json_out_key(w, "args");
        json_out_begin_object(w);
        uint64_t shown = 0;
        for (size_t j = 0; j < n; j++) {
            uint64_t b = line_bytes(s, sr, &r[i], names[j]);
            shown += b;
            json_out_key_u64(w, names[j], b);
        }
        uint64_t total = r[i].x ? r[i].x->allocated_bytes : r[i].h.total_bytes, cache = 0;
        if (r[i].x != NULL && r[i].x->reserved_bytes != SNAP_UNKNOWN &&
            r[i].x->reserved_bytes > total)
            cache = r[i].x->reserved_bytes - total;
        else if (r[i].x == NULL && r[i].h.has_cache && r[i].h.cache_bytes != SNAP_UNKNOWN)
            cache = r[i].h.cache_bytes;
        json_out_key_u64(w, "other lines", total > shown ? total - shown : 0);
        json_out_key_u64(w, "PyTorch's cache", cache);
        json_out_end_object(w);
        json_out_end_object(w);
    }
    free(names);
    rc = 1;
out:
    for (size_t i = 0; i < nr; i++)
        if (r[i].x == NULL)
            holders_free(&r[i].h);
    free(r);
    return rc;
}

int timeline_tensor_tracks(struct json_out *w, struct snapshot *s, int64_t pid, unsigned top)
{
    int n = 0;
    for (size_t d = 0; d < s->ndevices; d++) {
        int rc = device_tensors(w, s, &s->devices[d], pid, top);
        if (rc < 0)
            return -1;
        n += rc;
    }
    return n;
}
