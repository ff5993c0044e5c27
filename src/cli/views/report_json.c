/* report_json.c - `cumemtrace report --json`: the normalised model.
 *
 * Stable for scripts (docs/cli.md documents every field; additions only
 * within schema_version 1).  Normalised means: stack ids are replaced by
 * frame names (frames.h), demangled; groups with the same call site are
 * summed; unknown values are null; derived facts the human report shows
 * (granularity waste, advice) are included so scripts need not recompute.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "cli.h"
#include "frames.h"
#include "json_out.h"
#include "report.h"
#include "report_allocator.h"
#include "report_json_holders.h"
#include "report_phases.h"
#include "snapshot_phases.h"
#include "sites.h"

static const struct row kind_rows[] = {SNAP_KIND_STATS_SCHEMA(ROW)};
static const struct row vmm_rows[] = {SNAP_VMM_SCHEMA(ROW)};
static const struct row frag_rows[] = {SNAP_FRAG_SCHEMA(ROW)};
static const struct row bucket_rows[] = {SNAP_BUCKET_SCHEMA(ROW)};
static const struct row device_rows[] = {SNAP_DEVICE_SCHEMA(ROW)};
static const struct row process_rows[] = {SNAP_PROCESS_SCHEMA(ROW)};
static const struct row limit_rows[] = {SNAP_LIMIT_SCHEMA(ROW)};
static const struct row config_rows[] = {SNAP_CONFIG_SCHEMA(ROW)};
static const struct row counter_rows[] = {SNAP_COUNTERS_SCHEMA(ROW)};
static const struct row oom_rows[] = {SNAP_OOM_SCHEMA(ROW)};
static const struct row ooms_rows[] = {SNAP_OOMS_SCHEMA(ROW)};
static const struct row events_rows[] = {SNAP_EVENTS_SCHEMA(ROW)};
static const struct row top_rows[] = {SNAP_TOP_SCHEMA(ROW)};
static const struct row top_tensor_rows[] = {SNAP_TOP_TENSOR_SCHEMA(ROW)};
static const struct row role_rows[] = {SNAP_ROLES_SCHEMA(ROW)};
static const struct row phase_top_rows[] = {SNAP_PHASE_TOP_SCHEMA(ROW)};
static const struct row phase_row_rows[] = {SNAP_PHASE_ROW_SCHEMA(ROW)};
static const struct row churn_rows[] = {SNAP_CHURN_SCHEMA(ROW)};

/* An object of one table's rows (those of run 1). */
#define OBJECT(w, obj, table) \
    (json_out_begin_object(w), ROWS(w, obj, table, 1), json_out_end_object(w))

static void frames_of(struct json_out *w, const struct snapshot *s, uint32_t stack)
{
    json_out_begin_array(w);
    if (stack != SNAP_NO_STACK) {
        const struct snap_stack *st = &s->stacks[stack];
        for (uint32_t i = 0; i < st->nframes; i++)
            json_out_string(w, s->ctx->frames[st->frames[i]].name);
    }
    json_out_end_array(w);
}

/* Groups summed by call site, largest first. */
static int sites(struct json_out *w, struct snapshot *s, const struct snap_groups *g,
                 unsigned top)
{
    struct sites_sum sum;
    if (sites_sum_sorted(&sum, s, g) != 0)
        return -1;
    json_out_begin_array(w);
    for (size_t i = 0; i < sum.ntouched && (top == 0 || i < top); i++) {
        uint32_t id = sum.touched[i];
        const struct site *site = frames_site_get(s->ctx, BY_STACK, id);
        json_out_begin_object(w);
        json_out_key(w, "site"); json_out_string(w, site->label);
        json_out_key(w, "entry");
        json_out_string(w, site->stack != SNAP_NO_STACK ? site->snap->stacks[site->stack].entry
                                                        : NULL);
        json_out_key(w, "frames"); frames_of(w, site->snap, site->stack);
        json_out_key(w, "bytes"); json_out_u64(w, sum.bytes[id]);
        json_out_key(w, "count"); json_out_u64(w, sum.count[id]);
        json_out_key(w, "kinds");
        json_out_begin_array(w);
        for (int k = 0; k < KIND_COUNT; k++)
            if (sum.kinds[id] & (1u << k))
                json_out_string(w, snapshot_kind_name(k));
        json_out_end_array(w);
        json_out_end_object(w);
    }
    json_out_end_array(w);
    sites_free(&sum);
    return 0;
}

/* The live tensors by the Python line that allocated them (PyTorch's
 * history): null when the allocator kept none, else
 * [{site, bytes, count}], largest first; site "" when the block has no
 * Python stack (allocated off the Python thread, e.g. by autograd's
 * backward). */
static void tensors(struct json_out *w, const struct snap_allocator *a)
{
    if (!a->present || !a->has_top) {
        json_out_null(w);
        return;
    }
    json_out_begin_array(w);
    for (size_t i = 0; i < a->ntop; i++) {
        json_out_begin_object(w);
        json_out_key(w, "site"); json_out_string(w, a->top[i].where ? a->top[i].where : "");
        ROWS(w, &a->top[i], top_tensor_rows, 1);
        json_out_end_object(w);
    }
    json_out_end_array(w);
}

/* PyTorch's allocated bytes by role (the snapshot's allocator.roles) and
 * its cache: null when not measured. */
static void roles(struct json_out *w, const struct snap_allocator *a)
{
    if (!a->present || !a->has_roles) {
        json_out_null(w);
        return;
    }
    json_out_begin_object(w);
    ROWS(w, a, role_rows, 1);
    json_out_key(w, "cache");
    json_out_u64(w, a->reserved_unallocated_bytes);
    ROWS(w, a, role_rows, 2);
    json_out_end_object(w);
}

/* The "Ranges at peak" table of `report --by range`, its rows in its
 * order: null without phases, else [{range, source, at_peak_bytes,
 * at_peak_count, bytes, count, allocs, bytes_allocated, top_at_peak}],
 * the first `top` (0: all), and *rest what the table's "(N more ranges)"
 * row sums. */
static int by_range(struct json_out *w, struct snapshot *s, const struct snap_phase_rows *rows,
                    unsigned top)
{
    json_out_key(w, "by_range");
    if (!rows->present) {
        json_out_null(w);
        json_out_key(w, "by_range_rest");
        json_out_null(w);
        return 0;
    }
    const struct snap_phase_row **v = report_phases_sorted(rows);
    if (v == NULL)
        return -1;
    size_t shown = top == 0 || rows->n < top ? rows->n : top;
    json_out_begin_array(w);
    for (size_t i = 0; i < shown; i++) {
        const struct snap_phase_row *r = v[i];
        const struct snap_phase *ph = snapshot_phase(s, r->phase);
        json_out_begin_object(w);
        json_out_key(w, "range"); json_out_string(w, snapshot_phase_path(s, r->phase));
        json_out_key(w, "source"); json_out_string(w, ph ? ph->source : NULL);
        ROWS(w, r, phase_row_rows, 1);
        json_out_key(w, "top_at_peak");
        json_out_begin_array(w);
        for (size_t k = 0; k < r->ntop; k++) {
            uint32_t id = frames_site(s, r->top[k].stack, BY_STACK);
            json_out_begin_object(w);
            json_out_key(w, "site");
            json_out_string(w, id != FRAMES_NONE ? frames_site_get(s->ctx, BY_STACK, id)->label
                                                 : NULL);
            ROWS(w, &r->top[k], phase_top_rows, 1);
            json_out_end_object(w);
        }
        json_out_end_array(w);
        json_out_end_object(w);
    }
    json_out_end_array(w);
    static const char *const rest_keys[] = {"ranges", "at_peak_bytes", "at_peak_count",
                                            "bytes", "allocs"};
    uint64_t rest[5] = {rows->n - shown, 0, 0, 0, 0};
    for (size_t i = shown; i < rows->n; i++) {
        rest[1] += v[i]->at_peak_bytes;
        rest[2] += v[i]->at_peak_count;
        rest[3] += v[i]->bytes;
        rest[4] += v[i]->allocs;
    }
    json_out_key_u64s(w, "by_range_rest", rows->n > shown, rest_keys, rest, 5);
    free(v);
    return 0;
}

/* A device's or the host's at_peak, by_range, by_range_rest and live. */
static int held(struct json_out *w, struct snapshot *s, const struct snap_groups *at_peak,
                const struct snap_phase_rows *by_phase, const struct snap_groups *live,
                unsigned top)
{
    json_out_key(w, "at_peak");
    if (sites(w, s, at_peak, top) != 0 || by_range(w, s, by_phase, top) != 0)
        return -1;
    json_out_key(w, "live");
    return sites(w, s, live, top);
}

static int device(struct json_out *w, struct snapshot *s, const struct snap_device *d,
                  unsigned top)
{
    json_out_begin_object(w);
    ROWS(w, d, device_rows, 1);
    char when[640];
    json_out_key(w, "peak_during");
    json_out_string(w, report_allocator_when(s, d->peak_phase, report_allocator_peak_step(s, d),
                                             when, sizeof when)[0] ? when : NULL);
    char age[768];
    json_out_key(w, "pytorch_figures_age");
    json_out_string(w, report_allocator_age(s, &d->allocator, age, sizeof age)[0] ? age : NULL);
    json_out_key(w, "by_kind");
    json_out_begin_object(w);
    for (int k = 0; k < DEVICE_KINDS; k++) { /* the by_kind keys: the first kinds' names */
        json_out_key(w, snapshot_kind_names[k]);
        OBJECT(w, &d->by_kind[k], kind_rows);
    }
    json_out_end_object(w);
    json_out_key(w, "vmm");
    if (d->vmm.present)
        OBJECT(w, &d->vmm, vmm_rows);
    else
        json_out_null(w);
    json_out_key(w, "fragmentation");
    if (d->frag.present) {
        const struct snap_frag *f = &d->frag;
        json_out_begin_object(w);
        ROWS(w, f, frag_rows, 1);
        json_out_key(w, "waste_bytes");
        json_out_u64(w, f->rounded_bytes > f->requested_bytes
                            ? f->rounded_bytes - f->requested_bytes : 0);
        ROWS(w, f, frag_rows, 2);
        json_out_end_object(w);
    } else {
        json_out_null(w);
    }
    json_out_key(w, "histogram");
    json_out_begin_array(w);
    for (size_t i = 0; i < d->nhist; i++)
        OBJECT(w, &d->hist[i], bucket_rows);
    json_out_end_array(w);
    json_out_key(w, "tensors"); tensors(w, &d->allocator);
    json_out_key(w, "roles"); roles(w, &d->allocator);
    if (held(w, s, &d->at_peak, &d->by_phase, &d->live, top) != 0)
        return -1;
    json_out_key(w, "holders");
    if (report_json_holders(w, s, d, HOLDERS_NOW, top) != 0)
        return -1;
    json_out_key(w, "holders_at_peak");
    if (report_json_holders(w, s, d, HOLDERS_PEAK, top) != 0)
        return -1;
    json_out_key(w, "growth");
    if (report_json_growth(w, s, d) != 0)
        return -1;
    /* Per stack over the run, as the snapshot has it (not merged by site:
     * a script comparing with its own counts wants the stacks). */
    json_out_key(w, "churn");
    json_out_begin_array(w);
    for (size_t i = 0; i < d->churn.n; i++) {
        const struct snap_group *g = &d->churn.v[i];
        json_out_begin_object(w);
        json_out_key(w, "site");
        if (g->stack != SNAP_NO_STACK) {
            uint32_t site = frames_site(s, g->stack, BY_STACK);
            if (site == FRAMES_NONE)
                return -1;
            json_out_string(w, frames_site_get(s->ctx, BY_STACK, site)->label);
        } else {
            json_out_null(w);
        }
        json_out_key(w, "frames"); frames_of(w, s, g->stack);
        ROWS(w, g, churn_rows, 1);
        json_out_end_object(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
    return 0;
}

static void process(struct json_out *w, const struct snap_process *p)
{
    json_out_begin_object(w);
    ROWS(w, p, process_rows, 1);
    json_out_key(w, "cmdline");
    json_out_begin_array(w);
    for (size_t i = 0; i < p->ncmdline; i++)
        json_out_string(w, p->cmdline[i]);
    json_out_end_array(w);
    ROWS(w, p, process_rows, 2);
    json_out_end_object(w);
}

static int oom(struct json_out *w, struct snapshot *s, unsigned top)
{
    const struct snap_oom *o = &s->oom;
    if (!o->present) {
        json_out_null(w);
        return 0;
    }
    json_out_begin_object(w);
    ROWS(w, o, oom_rows, 1);
    json_out_key(w, "kind"); json_out_string(w, snapshot_kind_name(o->kind));
    ROWS(w, o, oom_rows, 2);
    /* the by_kind keys are the first kinds' names */
    json_out_key_u64s(w, "by_kind", true, snapshot_kind_names, o->by_kind, DEVICE_KINDS);
    json_out_key(w, "cause"); json_out_string(w, snapshot_cause_name(o));
    char when[640];
    json_out_key(w, "during");
    json_out_string(w, report_allocator_when(s, o->phase, o->allocator.present ? o->allocator.step
                                                                             : SNAP_UNKNOWN_I64,
                                             when, sizeof when)[0] ? when : NULL);
    json_out_key(w, "origin");
    char sentence[1024];
    report_json_origin(w, s, o->allocator.present ? &o->allocator.origin : NULL,
                       oom_text_origin(s, sentence, sizeof sentence));
    ROWS(w, o, oom_rows, 3);
    json_out_key(w, "site");
    json_out_string(w, o->stack != SNAP_NO_STACK
                           ? frames_group_label(s, o->stack, BY_STACK)
                           : NULL);
    json_out_key(w, "frames"); frames_of(w, s, o->stack);
    json_out_key(w, "tensors"); tensors(w, &o->allocator);
    json_out_key(w, "roles"); roles(w, &o->allocator);
    json_out_key(w, "released");
    if (sites(w, s, &o->released, top) != 0)
        return -1;
    json_out_key(w, "live");
    if (sites(w, s, &o->live, top) != 0)
        return -1;
    json_out_key(w, "holders");
    if (report_json_holders(w, s, NULL, HOLDERS_OOM, top) != 0)
        return -1;
    json_out_end_object(w);
    return 0;
}

static int snapshot(struct json_out *w, struct snapshot *s, unsigned top)
{
    json_out_begin_object(w);
    json_out_key(w, "file"); json_out_string(w, s->file);
    json_out_key(w, "file_bytes"); json_out_u64(w, s->file_bytes);
    json_out_key(w, "format_version"); json_out_i64(w, s->version);
    ROWS(w, s, top_rows, 1);
    json_out_key(w, "process"); process(w, &s->process);
    json_out_key(w, "config");
    json_out_begin_object(w);
    ROWS(w, &s->config, config_rows, 1);
    json_out_key(w, "limits");
    json_out_begin_array(w);
    for (size_t i = 0; i < s->config.nlimits; i++)
        OBJECT(w, &s->config.limits[i], limit_rows);
    json_out_end_array(w);
    json_out_end_object(w);
    json_out_key(w, "devices");
    json_out_begin_array(w);
    for (size_t i = 0; i < s->ndevices; i++)
        if (device(w, s, &s->devices[i], top) != 0)
            return -1;
    json_out_end_array(w);
    json_out_key(w, "host_pinned");
    if (s->host.present) {
        json_out_begin_object(w);
        ROWS(w, &s->host.stats, kind_rows, 1);
        if (held(w, s, &s->host.at_peak, &s->host.by_phase, &s->host.live, top) != 0)
            return -1;
        json_out_end_object(w);
    } else {
        json_out_null(w);
    }
    json_out_key(w, "counters");
    OBJECT(w, &s->counters, counter_rows);
    json_out_key(w, "ooms");
    json_out_begin_object(w);
    ROWS(w, &s->ooms, ooms_rows, 1);
    json_out_key(w, "dumps");
    json_out_begin_array(w);
    for (size_t i = 0; i < s->ooms.ndumps; i++)
        json_out_string(w, s->ooms.dumps[i]);
    json_out_end_array(w);
    json_out_end_object(w);
    json_out_key(w, "oom");
    if (oom(w, s, top) != 0)
        return -1;
    json_out_key(w, "events");
    json_out_begin_object(w);
    ROWS(w, &s->events, events_rows, 1);
    json_out_key(w, "kept"); json_out_u64(w, s->events.rows);
    ROWS(w, &s->events, events_rows, 2);
    json_out_end_object(w);
    struct advice adv[ADVICE_MAX];
    int n = advice_compute(s, adv);
    if (n < 0)
        return -1;
    json_out_key(w, "advice");
    json_out_begin_array(w);
    for (int i = 0; i < n; i++) {
        json_out_begin_object(w);
        json_out_key(w, "id"); json_out_string(w, adv[i].id);
        json_out_key(w, "text"); json_out_string(w, adv[i].text);
        json_out_end_object(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
    return 0;
}

int report_json(FILE *f, struct snapshot **s, size_t n, unsigned top)
{
    struct json_out w;
    json_out_init(&w, f, true);
    json_out_begin_object(&w);
    json_out_key(&w, "schema"); json_out_string(&w, "cumemtrace-report");
    json_out_key(&w, "schema_version"); json_out_i64(&w, 1);
    json_out_key(&w, "tool_version"); json_out_string(&w, CUMEMTRACE_CLI_VERSION);
    json_out_key(&w, "selected"); json_out_u64(&w, n ? report_pick(s, n) : 0);
    json_out_key(&w, "snapshots");
    json_out_begin_array(&w);
    for (size_t i = 0; i < n; i++)
        if (snapshot(&w, s[i], top) != 0)
            return -1;
    json_out_end_array(&w);
    json_out_end_object(&w);
    json_out_finish(&w);
    return 0;
}
