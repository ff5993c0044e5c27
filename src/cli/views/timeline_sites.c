/* timeline_sites.c - per-call-site counter tracks of the Chrome trace
 * (timeline.h; docs/cli.md's `timeline` section), rebuilt from the deltas
 * of the event log: exact only when nothing was thinned, so a thinned log
 * gets none (timeline.c says so in otherData).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "report.h"
#include "timeline.h"

/* Arg names must differ: sites sharing a label (one allocator function)
 * get their first caller, then a number. */
static char *site_name(struct snapshot *s, uint32_t stack, char **names, size_t n)
{
    char callers[256], buf[512];
    const char *label = frames_group_label(s, stack, BY_STACK);
    frames_callers(s, stack, 1, callers, sizeof callers);
    snprintf(buf, sizeof buf, "%s%s%s", label ? label : "?", callers[0] ? " " : "", callers);
    size_t len = strlen(buf);
    for (int k = 2; k < 100; k++) {
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = strcmp(names[i], buf) == 0;
        if (!dup)
            break;
        snprintf(buf + len, sizeof buf - len, " #%d", k);
    }
    return strdup(buf);
}

static int device_sites(struct json_out *w, struct snapshot *s, const struct snap_device *d,
                        int64_t pid, unsigned top)
{
    uint32_t *site = calloc(top, sizeof *site);
    char **names = calloc(top, sizeof *names);
    int64_t *cur = calloc(top + 1, sizeof *cur);
    size_t n = 0;
    int rc = -1;
    if (site == NULL || names == NULL || cur == NULL)
        goto out;
    /* The device's biggest sites at its peak (groups are largest first). */
    for (size_t i = 0; i < d->at_peak.n && n < top; i++) {
        uint32_t id = frames_site(s, d->at_peak.v[i].stack, BY_STACK);
        if (id == FRAMES_NONE)
            goto out;
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = site[k] == id;
        if (seen)
            continue;
        names[n] = site_name(s, d->at_peak.v[i].stack, names, n);
        if (names[n] == NULL)
            goto out;
        site[n++] = id;
    }
    if (n == 0) {
        rc = 0;
        goto out;
    }
    char tname[64];
    snprintf(tname, sizeof tname, "device %" PRId64 " by call site", d->ordinal);
    for (size_t i = 0; i < s->events.n; i++) {
        const struct snap_event *e = &s->events.v[i];
        if (e->device != d->ordinal || e->unfocused) /* --focus left it out */
            continue;
        uint32_t st = e->stack_id > 0 ? snapshot_stack_index(s, e->stack_id) : SNAP_NO_STACK;
        uint32_t id = frames_site(s, st, BY_STACK);
        if (id == FRAMES_NONE)
            goto out;
        size_t k = 0;
        while (k < n && site[k] != id)
            k++;
        cur[k] += e->delta; /* k == n: other */
        timeline_event_head(w, tname, NULL, "C", pid, 0, e->t_ns);
        json_out_key(w, "args");
        json_out_begin_object(w);
        for (size_t j = 0; j <= n; j++)
            json_out_key_i64(w, j < n ? names[j] : "other", cur[j] > 0 ? cur[j] : 0);
        json_out_end_object(w);
        json_out_end_object(w);
    }
    rc = 0;
out:
    for (size_t k = 0; names && k < n; k++)
        free(names[k]);
    free(names);
    free(site);
    free(cur);
    return rc;
}

int timeline_site_tracks(struct json_out *w, struct snapshot *s, int64_t pid, unsigned top)
{
    if (top == 0)
        return 0;
    for (size_t d = 0; d < s->ndevices; d++)
        if (device_sites(w, s, &s->devices[d], pid, top) != 0)
            return -1;
    return 0;
}
