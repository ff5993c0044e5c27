/* report_json.c - `cumemtrace report --json`: the normalised model.
 *
 * Stable for scripts (docs/cli.md documents every field; additions only
 * within schema_version 1).  Normalised means: stack ids are replaced by
 * frame names (frames.h), demangled; groups with the same call site are
 * summed; unknown values are null; derived facts the human report shows
 * (granularity waste, advice) are included so scripts need not recompute.
 */
#include <inttypes.h>
#include <string.h>

#include "advice.h"
#include "cli.h"
#include "frames.h"
#include "jsonw.h"
#include "report.h"
#include "report_allocator.h"
#include "sites.h"

static void stats(struct jsonw *w, const struct snap_kind_stats *k)
{
    jsonw_begin_object(w);
    jsonw_key(w, "current_bytes"); jsonw_u64(w, k->current_bytes);
    jsonw_key(w, "peak_bytes"); jsonw_u64(w, k->peak_bytes);
    jsonw_key(w, "peak_time_ns"); jsonw_i64(w, k->peak_time_ns);
    jsonw_key(w, "allocs"); jsonw_u64(w, k->allocs);
    jsonw_key(w, "frees"); jsonw_u64(w, k->frees);
    jsonw_key(w, "failures"); jsonw_u64(w, k->failures);
    jsonw_end_object(w);
}

static void frames_of(struct jsonw *w, const struct snapshot *s, uint32_t stack)
{
    jsonw_begin_array(w);
    if (stack != SNAP_NO_STACK) {
        const struct snap_stack *st = &s->stacks[stack];
        for (uint32_t i = 0; i < st->nframes; i++)
            jsonw_string(w, s->ctx->frames[st->frames[i]].name);
    }
    jsonw_end_array(w);
}

/* Groups summed by call site, largest first. */
static int sites(struct jsonw *w, struct snapshot *s, const struct snap_groups *g,
                 unsigned top)
{
    struct sites_sum sum;
    sites_init(&sum, BY_STACK);
    if (sites_add(&sum, s, g) != 0) {
        sites_free(&sum);
        return -1;
    }
    sites_sort(&sum, s->ctx);
    jsonw_begin_array(w);
    for (size_t i = 0; i < sum.ntouched && (top == 0 || i < top); i++) {
        uint32_t id = sum.touched[i];
        const struct site *site = frames_site_get(s->ctx, BY_STACK, id);
        jsonw_begin_object(w);
        jsonw_key(w, "site"); jsonw_string(w, site->label);
        jsonw_key(w, "entry");
        jsonw_string(w, site->stack != SNAP_NO_STACK ? site->snap->stacks[site->stack].entry
                                                     : NULL);
        jsonw_key(w, "frames"); frames_of(w, site->snap, site->stack);
        jsonw_key(w, "bytes"); jsonw_u64(w, sum.bytes[id]);
        jsonw_key(w, "count"); jsonw_u64(w, sum.count[id]);
        jsonw_key(w, "kinds");
        jsonw_begin_array(w);
        for (int k = 0; k < KIND_COUNT; k++)
            if (sum.kinds[id] & (1u << k))
                jsonw_string(w, snapshot_kind_name(k));
        jsonw_end_array(w);
        jsonw_end_object(w);
    }
    jsonw_end_array(w);
    sites_free(&sum);
    return 0;
}

/* The live tensors by the Python line that allocated them (PyTorch's
 * history): null when the allocator kept none, else
 * [{site, bytes, count}], largest first; site "" when the block has no
 * Python stack (autograd's backward thread). */
static void tensors(struct jsonw *w, const struct snap_allocator *a)
{
    if (!a->present || !a->has_top) {
        jsonw_null(w);
        return;
    }
    jsonw_begin_array(w);
    for (size_t i = 0; i < a->ntop; i++) {
        jsonw_begin_object(w);
        jsonw_key(w, "site"); jsonw_string(w, a->top[i].where ? a->top[i].where : "");
        jsonw_key(w, "bytes"); jsonw_u64(w, a->top[i].bytes);
        jsonw_key(w, "count"); jsonw_u64(w, a->top[i].count);
        jsonw_end_object(w);
    }
    jsonw_end_array(w);
}

/* PyTorch's allocated bytes by role (the snapshot's allocator.roles) and
 * its cache: null when not measured. */
static void roles(struct jsonw *w, const struct snap_allocator *a)
{
    if (!a->present || !a->has_roles) {
        jsonw_null(w);
        return;
    }
    static const char *const keys[SNAP_ROLES] = {"parameters", "buffers", "gradients",
                                                  "optimizer_state", "other"};
    jsonw_begin_object(w);
    for (int i = 0; i < SNAP_ROLES; i++) {
        jsonw_key(w, keys[i]);
        jsonw_u64(w, a->roles[i]);
    }
    jsonw_key(w, "cache");
    jsonw_u64(w, a->reserved_unallocated_bytes);
    jsonw_key(w, "optimizers");
    jsonw_string(w, a->optimizers);
    jsonw_end_object(w);
}

static int device(struct jsonw *w, struct snapshot *s, const struct snap_device *d,
                  unsigned top)
{
    const char *const *names = snapshot_kind_names; /* the by_kind keys first */
    jsonw_begin_object(w);
    jsonw_key(w, "ordinal"); jsonw_i64(w, d->ordinal);
    jsonw_key(w, "total_bytes"); jsonw_u64(w, d->total_bytes);
    jsonw_key(w, "free_bytes"); jsonw_u64(w, d->free_bytes);
    jsonw_key(w, "limit_bytes"); jsonw_u64(w, d->limit_bytes);
    jsonw_key(w, "current_bytes"); jsonw_u64(w, d->current_bytes);
    jsonw_key(w, "peak_bytes"); jsonw_u64(w, d->peak_bytes);
    jsonw_key(w, "peak_time_ns"); jsonw_i64(w, d->peak_time_ns);
    char when[640];
    jsonw_key(w, "peak_during");
    jsonw_string(w, report_allocator_when(s, d->peak_phase, report_allocator_peak_step(s, d),
                                          when, sizeof when)[0] ? when : NULL);
    jsonw_key(w, "by_kind");
    jsonw_begin_object(w);
    for (int k = 0; k < DEVICE_KINDS; k++) {
        jsonw_key(w, names[k]);
        stats(w, &d->by_kind[k]);
    }
    jsonw_end_object(w);
    jsonw_key(w, "vmm");
    if (d->vmm.present) {
        jsonw_begin_object(w);
        jsonw_key(w, "reserved_bytes"); jsonw_u64(w, d->vmm.reserved_bytes);
        jsonw_key(w, "mapped_bytes"); jsonw_u64(w, d->vmm.mapped_bytes);
        jsonw_key(w, "physical_bytes"); jsonw_u64(w, d->vmm.physical_bytes);
        jsonw_key(w, "reserved_peak_bytes"); jsonw_u64(w, d->vmm.reserved_peak_bytes);
        jsonw_key(w, "mapped_peak_bytes"); jsonw_u64(w, d->vmm.mapped_peak_bytes);
        jsonw_end_object(w);
    } else {
        jsonw_null(w);
    }
    jsonw_key(w, "fragmentation");
    if (d->frag.present) {
        const struct snap_frag *f = &d->frag;
        jsonw_begin_object(w);
        jsonw_key(w, "granularity_bytes"); jsonw_u64(w, f->granularity_bytes);
        jsonw_key(w, "requested_bytes"); jsonw_u64(w, f->requested_bytes);
        jsonw_key(w, "rounded_bytes"); jsonw_u64(w, f->rounded_bytes);
        jsonw_key(w, "waste_bytes");
        jsonw_u64(w, f->rounded_bytes > f->requested_bytes ? f->rounded_bytes - f->requested_bytes : 0);
        jsonw_key(w, "small_count"); jsonw_u64(w, f->small_count);
        jsonw_key(w, "small_bytes"); jsonw_u64(w, f->small_bytes);
        jsonw_end_object(w);
    } else {
        jsonw_null(w);
    }
    jsonw_key(w, "histogram");
    jsonw_begin_array(w);
    for (size_t i = 0; i < d->nhist; i++) {
        jsonw_begin_object(w);
        jsonw_key(w, "le"); jsonw_u64(w, d->hist[i].le);
        jsonw_key(w, "count"); jsonw_u64(w, d->hist[i].count);
        jsonw_key(w, "bytes"); jsonw_u64(w, d->hist[i].bytes);
        jsonw_end_object(w);
    }
    jsonw_end_array(w);
    jsonw_key(w, "tensors"); tensors(w, &d->allocator);
    jsonw_key(w, "roles"); roles(w, &d->allocator);
    jsonw_key(w, "at_peak");
    if (sites(w, s, &d->at_peak, top) != 0)
        return -1;
    jsonw_key(w, "live");
    if (sites(w, s, &d->live, top) != 0)
        return -1;
    /* Per stack over the run, as the snapshot has it (not merged by site:
     * a script comparing with its own counts wants the stacks). */
    jsonw_key(w, "churn");
    jsonw_begin_array(w);
    for (size_t i = 0; i < d->churn.n; i++) {
        const struct snap_group *g = &d->churn.v[i];
        jsonw_begin_object(w);
        jsonw_key(w, "site");
        if (g->stack != SNAP_NO_STACK) {
            uint32_t site = frames_site(s, g->stack, BY_STACK);
            if (site == FRAMES_NONE)
                return -1;
            jsonw_string(w, frames_site_get(s->ctx, BY_STACK, site)->label);
        } else {
            jsonw_null(w);
        }
        jsonw_key(w, "frames"); frames_of(w, s, g->stack);
        jsonw_key(w, "allocs"); jsonw_u64(w, g->count);
        jsonw_key(w, "frees"); jsonw_u64(w, g->frees);
        jsonw_key(w, "bytes_allocated"); jsonw_u64(w, g->bytes);
        jsonw_key(w, "temporary"); jsonw_u64(w, g->temporary);
        jsonw_end_object(w);
    }
    jsonw_end_array(w);
    jsonw_end_object(w);
    return 0;
}

static void process(struct jsonw *w, const struct snap_process *p)
{
    jsonw_begin_object(w);
    jsonw_key(w, "pid"); jsonw_i64(w, p->pid);
    jsonw_key(w, "ppid"); jsonw_i64(w, p->ppid);
    jsonw_key(w, "rank"); jsonw_i64(w, p->rank);
    jsonw_key(w, "exe"); jsonw_string(w, p->exe);
    jsonw_key(w, "cmdline");
    jsonw_begin_array(w);
    for (size_t i = 0; i < p->ncmdline; i++)
        jsonw_string(w, p->cmdline[i]);
    jsonw_end_array(w);
    jsonw_key(w, "host"); jsonw_string(w, p->host);
    jsonw_key(w, "start_wall_ns"); jsonw_i64(w, p->start_wall_ns);
    jsonw_key(w, "dump_time_ns"); jsonw_i64(w, p->dump_time_ns);
    jsonw_key(w, "tool_version"); jsonw_string(w, p->tool_version);
    jsonw_end_object(w);
}

static int oom(struct jsonw *w, struct snapshot *s, unsigned top)
{
    const struct snap_oom *o = &s->oom;
    if (!o->present) {
        jsonw_null(w);
        return 0;
    }
    const char *const *names = snapshot_kind_names; /* the by_kind keys first */
    jsonw_begin_object(w);
    jsonw_key(w, "requested_bytes"); jsonw_u64(w, o->requested_bytes);
    jsonw_key(w, "device"); jsonw_i64(w, o->device);
    jsonw_key(w, "kind"); jsonw_string(w, snapshot_kind_name(o->kind));
    jsonw_key(w, "entry_point"); jsonw_string(w, o->entry_point);
    jsonw_key(w, "thread"); jsonw_i64(w, o->thread);
    jsonw_key(w, "time_ns"); jsonw_i64(w, o->time_ns);
    jsonw_key(w, "total_bytes"); jsonw_u64(w, o->total_bytes);
    jsonw_key(w, "free_bytes"); jsonw_u64(w, o->free_bytes);
    jsonw_key(w, "limit_bytes"); jsonw_u64(w, o->limit_bytes);
    jsonw_key(w, "tracked_bytes"); jsonw_u64(w, o->tracked_bytes);
    jsonw_key(w, "untracked_bytes"); jsonw_u64(w, o->untracked_bytes);
    jsonw_key(w, "by_kind");
    jsonw_begin_object(w);
    for (int k = 0; k < DEVICE_KINDS; k++) {
        jsonw_key(w, names[k]);
        jsonw_u64(w, o->by_kind[k]);
    }
    jsonw_end_object(w);
    jsonw_key(w, "cause"); jsonw_string(w, snapshot_cause_name(o));
    char when[640];
    jsonw_key(w, "during");
    jsonw_string(w, report_allocator_when(s, o->phase, o->allocator.present ? o->allocator.step
                                                                          : SNAP_UNKNOWN_I64,
                                          when, sizeof when)[0] ? when : NULL);
    jsonw_key(w, "shortfall_bytes"); jsonw_u64(w, o->shortfall_bytes);
    jsonw_key(w, "attempts"); jsonw_u64(w, o->attempts);
    jsonw_key(w, "recovered"); jsonw_tribool(w, o->recovered);
    jsonw_key(w, "released_bytes"); jsonw_u64(w, o->released_bytes);
    jsonw_key(w, "released_count"); jsonw_u64(w, o->released_count);
    jsonw_key(w, "site");
    jsonw_string(w, o->stack != SNAP_NO_STACK
                        ? frames_group_label(s, o->stack, BY_STACK)
                        : NULL);
    jsonw_key(w, "frames"); frames_of(w, s, o->stack);
    jsonw_key(w, "tensors"); tensors(w, &o->allocator);
    jsonw_key(w, "roles"); roles(w, &o->allocator);
    jsonw_key(w, "released");
    if (sites(w, s, &o->released, top) != 0)
        return -1;
    jsonw_key(w, "live");
    if (sites(w, s, &o->live, top) != 0)
        return -1;
    jsonw_end_object(w);
    return 0;
}

static int snapshot(struct jsonw *w, struct snapshot *s, unsigned top)
{
    jsonw_begin_object(w);
    jsonw_key(w, "file"); jsonw_string(w, s->file);
    jsonw_key(w, "file_bytes"); jsonw_u64(w, s->file_bytes);
    jsonw_key(w, "format_version"); jsonw_i64(w, s->version);
    jsonw_key(w, "reason"); jsonw_string(w, s->reason);
    jsonw_key(w, "sequence"); jsonw_i64(w, s->sequence);
    jsonw_key(w, "process"); process(w, &s->process);
    jsonw_key(w, "config");
    jsonw_begin_object(w);
    jsonw_key(w, "depth"); jsonw_u64(w, s->config.depth);
    jsonw_key(w, "event_cap"); jsonw_u64(w, s->config.event_cap);
    jsonw_key(w, "python"); jsonw_tribool(w, s->config.python);
    jsonw_key(w, "native"); jsonw_tribool(w, s->config.native);
    jsonw_key(w, "temporary_ms"); jsonw_u64(w, s->config.temporary_ms);
    jsonw_key(w, "limits");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->config.nlimits; i++) {
        jsonw_begin_object(w);
        jsonw_key(w, "device"); jsonw_i64(w, s->config.limits[i].device);
        jsonw_key(w, "bytes"); jsonw_u64(w, s->config.limits[i].bytes);
        jsonw_end_object(w);
    }
    jsonw_end_array(w);
    jsonw_end_object(w);
    jsonw_key(w, "devices");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->ndevices; i++)
        if (device(w, s, &s->devices[i], top) != 0)
            return -1;
    jsonw_end_array(w);
    jsonw_key(w, "host_pinned");
    if (s->host.present) {
        jsonw_begin_object(w);
        jsonw_key(w, "current_bytes"); jsonw_u64(w, s->host.stats.current_bytes);
        jsonw_key(w, "peak_bytes"); jsonw_u64(w, s->host.stats.peak_bytes);
        jsonw_key(w, "peak_time_ns"); jsonw_i64(w, s->host.stats.peak_time_ns);
        jsonw_key(w, "allocs"); jsonw_u64(w, s->host.stats.allocs);
        jsonw_key(w, "frees"); jsonw_u64(w, s->host.stats.frees);
        jsonw_key(w, "failures"); jsonw_u64(w, s->host.stats.failures);
        jsonw_key(w, "at_peak");
        if (sites(w, s, &s->host.at_peak, top) != 0)
            return -1;
        jsonw_key(w, "live");
        if (sites(w, s, &s->host.live, top) != 0)
            return -1;
        jsonw_end_object(w);
    } else {
        jsonw_null(w);
    }
    const struct snap_counters *c = &s->counters;
    jsonw_key(w, "counters");
    jsonw_begin_object(w);
    jsonw_key(w, "unknown_frees"); jsonw_u64(w, c->unknown_frees);
    jsonw_key(w, "wrong_kind_frees"); jsonw_u64(w, c->wrong_kind_frees);
    jsonw_key(w, "reentrant_untracked"); jsonw_u64(w, c->reentrant_untracked);
    jsonw_key(w, "failed_frees"); jsonw_u64(w, c->failed_frees);
    jsonw_key(w, "stacks"); jsonw_u64(w, c->stacks);
    jsonw_key(w, "live_allocations"); jsonw_u64(w, c->live_allocations);
    jsonw_end_object(w);
    jsonw_key(w, "ooms");
    jsonw_begin_object(w);
    jsonw_key(w, "count"); jsonw_u64(w, s->ooms.count);
    jsonw_key(w, "failed_attempts"); jsonw_u64(w, s->ooms.failed_attempts);
    jsonw_key(w, "recovered"); jsonw_u64(w, s->ooms.recovered);
    jsonw_key(w, "retry_released_bytes"); jsonw_u64(w, s->ooms.retry_released_bytes);
    jsonw_key(w, "suppressed"); jsonw_u64(w, s->ooms.suppressed);
    jsonw_key(w, "dumps");
    jsonw_begin_array(w);
    for (size_t i = 0; i < s->ooms.ndumps; i++)
        jsonw_string(w, s->ooms.dumps[i]);
    jsonw_end_array(w);
    jsonw_end_object(w);
    jsonw_key(w, "oom");
    if (oom(w, s, top) != 0)
        return -1;
    jsonw_key(w, "events");
    jsonw_begin_object(w);
    jsonw_key(w, "cap"); jsonw_u64(w, s->events.cap);
    jsonw_key(w, "recorded"); jsonw_u64(w, s->events.recorded);
    jsonw_key(w, "kept"); jsonw_u64(w, s->events.rows);
    jsonw_key(w, "stride"); jsonw_u64(w, s->events.stride);
    jsonw_key(w, "thinned"); jsonw_tribool(w, s->events.thinned);
    jsonw_end_object(w);
    struct advice adv[ADVICE_MAX];
    int n = advice_compute(s, adv);
    if (n < 0)
        return -1;
    jsonw_key(w, "advice");
    jsonw_begin_array(w);
    for (int i = 0; i < n; i++) {
        jsonw_begin_object(w);
        jsonw_key(w, "id"); jsonw_string(w, adv[i].id);
        jsonw_key(w, "text"); jsonw_string(w, adv[i].text);
        jsonw_end_object(w);
    }
    jsonw_end_array(w);
    jsonw_end_object(w);
    return 0;
}

int report_json(FILE *f, struct snapshot **s, size_t n, unsigned top)
{
    struct jsonw w;
    jsonw_init(&w, f, true);
    jsonw_begin_object(&w);
    jsonw_key(&w, "schema"); jsonw_string(&w, "cumemtrace-report");
    jsonw_key(&w, "schema_version"); jsonw_i64(&w, 1);
    jsonw_key(&w, "tool_version"); jsonw_string(&w, CUMEMTRACE_CLI_VERSION);
    jsonw_key(&w, "selected"); jsonw_u64(&w, n ? report_pick(s, n) : 0);
    jsonw_key(&w, "snapshots");
    jsonw_begin_array(&w);
    for (size_t i = 0; i < n; i++)
        if (snapshot(&w, s[i], top) != 0)
            return -1;
    jsonw_end_array(&w);
    jsonw_end_object(&w);
    jsonw_finish(&w);
    return 0;
}
