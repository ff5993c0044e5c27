/* serialise_read.c - test_serialise.c's view through the CLI's snapshot
 * reader (src/cli/read/snapshot_read.c, every check `cumemtrace report`
 * makes of a file): see serialise_read.h. */
#include "serialise_read.h"

#include <stdio.h>
#include <string.h>

#include "format.h"
#include "snapshot_read.h"

static void sum_groups(const struct snap_groups *g, uint64_t *bytes, uint64_t *count)
{
    for (size_t i = 0; i < g->n; i++) {
        *bytes += g->v[i].bytes;
        if (count != NULL)
            *count += g->v[i].count;
    }
}

static void take_device(const struct snap_device *d, struct read_device *r)
{
    r->ordinal = d->ordinal;
    r->current = d->current_bytes;
    r->peak = d->peak_bytes;
    for (int k = 0; k < DEVICE_KINDS && k < READ_KINDS; k++) {
        r->kind_current[k] = d->by_kind[k].current_bytes;
        r->kind_peak[k] = d->by_kind[k].peak_bytes;
        r->kind_allocs[k] = d->by_kind[k].allocs;
        r->kind_frees[k] = d->by_kind[k].frees;
    }
    sum_groups(&d->live, &r->live_bytes, &r->live_count);
    sum_groups(&d->at_peak, &r->at_peak_bytes, NULL);
    r->nlive = d->live.n;
}

static void take(const struct snapshot *s, struct read_totals *out)
{
    snprintf(out->reason, sizeof out->reason, "%s", s->reason ? s->reason : "");
    out->sequence = s->sequence;
    out->ndevices = s->ndevices;
    for (size_t i = 0; i < s->ndevices && i < READ_DEVICES; i++)
        take_device(&s->devices[i], &out->dev[i]);
    out->host_current = s->host.stats.current_bytes;
    out->host_peak = s->host.stats.peak_bytes;
    out->nstacks = s->nstacks;
    for (size_t i = 0; i < s->nstacks && i < 16; i++) {
        out->stack_ids[i] = s->stacks[i].id;
        snprintf(out->entry[i], sizeof out->entry[i], "%s",
                 s->stacks[i].entry ? s->stacks[i].entry : "");
    }
    out->events = s->events.rows;
    out->oom_present = s->oom.present;
    if (s->oom.present) {
        out->oom_requested = s->oom.requested_bytes;
        out->oom_shortfall = s->oom.shortfall_bytes;
        out->oom_attempts = s->oom.attempts;
        out->oom_device = s->oom.device;
        const char *cause = format_cause_name((enum format_cause)s->oom.cause);
        snprintf(out->oom_cause, sizeof out->oom_cause, "%s",
                 cause ? cause : s->oom.cause_name ? s->oom.cause_name : "");
    }
    out->ooms_count = s->ooms.count;
}

int serialise_read(char *buf, size_t len, struct read_totals *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot s;
    memset(&s, 0, sizeof s);
    struct cli_error e;
    memset(&e, 0, sizeof e);
    int rc = snapshot_read_mem(&ctx, "serialised.json", buf, len, &s, &e);
    if (rc == 0)
        take(&s, out);
    else
        snprintf(err, errlen, "%s", e.msg);
    snapshot_free(&s);
    snapshot_ctx_free(&ctx);
    return rc == 0 ? 0 : -1;
}
