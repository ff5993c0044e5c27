/* timeline_tensors.c - PyTorch's tensors by line in the Chrome trace
 * (timeline.h).
 *
 * The snapshot holds PyTorch's tensors at a few readings, not a log of
 * them: the peak's (peak_tensors, at its time_ns), the failure's
 * (oom.allocator.tensors, at the OOM, on the failing device) and the
 * dump's (tensors).  Per device with any, one counter track "device N
 * tensors by line" with a sample at each reading, in time order: the
 * `top` lines holding the most at any reading (holders.h, named as report
 * names them), "other lines" and "PyTorch's cache" - each sample sums to
 * PyTorch's allocated bytes plus its cache at that reading.  Between
 * readings the track holds its value: Perfetto draws steps, the truth only
 * at the samples.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "holders.h"
#include "timeline.h"

#define READINGS 3

struct reading {
    int64_t t_ns;
    struct holders h;
    bool present;
};

static int by_time(const void *a, const void *b)
{
    int64_t x = ((const struct reading *)a)->t_ns, y = ((const struct reading *)b)->t_ns;
    return (x > y) - (x < y);
}

/* The top lines over every reading: names[0..*n), largest first by their
 * largest reading. */
static void pick_lines(struct reading *r, size_t nr, const char **names, size_t top,
                       size_t *n)
{
    *n = 0;
    while (*n < top) {
        const char *best = NULL;
        uint64_t most = 0;
        for (size_t i = 0; i < nr; i++)
            for (size_t k = 0; k < r[i].h.n; k++) {
                const struct holder *x = &r[i].h.v[k];
                bool taken = false;
                for (size_t j = 0; j < *n && !taken; j++)
                    taken = strcmp(names[j], x->display) == 0;
                if (!taken && (best == NULL || x->bytes > most)) {
                    best = x->display;
                    most = x->bytes;
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
    struct reading r[READINGS];
    size_t nr = 0;
    int rc = -1;
    memset(r, 0, sizeof r);
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
        r[nr].present = true;
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
    pick_lines(r, nr, names, top, &n);
    char tname[64];
    snprintf(tname, sizeof tname, "device %" PRId64 " tensors by line", d->ordinal);
    for (size_t i = 0; i < nr; i++) {
        const struct holders *h = &r[i].h;
        timeline_event_head(w, tname, "C", pid, r[i].t_ns);
        json_out_key(w, "args");
        json_out_begin_object(w);
        uint64_t shown = 0;
        for (size_t j = 0; j < n; j++) {
            uint64_t b = 0;
            for (size_t k = 0; k < h->n; k++)
                if (strcmp(h->v[k].display, names[j]) == 0)
                    b += h->v[k].bytes;
            shown += b;
            json_out_key(w, names[j]);
            json_out_u64(w, b);
        }
        json_out_key(w, "other lines");
        json_out_u64(w, h->total_bytes > shown ? h->total_bytes - shown : 0);
        json_out_key(w, "PyTorch's cache");
        json_out_u64(w, h->has_cache && h->cache_bytes != SNAP_UNKNOWN ? h->cache_bytes : 0);
        json_out_end_object(w);
        json_out_end_object(w);
    }
    free(names);
    rc = 1;
out:
    for (size_t i = 0; i < nr; i++)
        holders_free(&r[i].h);
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
