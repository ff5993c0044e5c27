/* snapshot_check.c - what the format promises across fields, checked on
 * the model after the parse (docs/snapshot-format.md, "Invariants"): stack
 * ids unique and every reference to a stack defined; device ordinals
 * non-negative and unique; current <= peak; the at_peak groups sum to the
 * peak and the live groups to current; kinds add up to the device; the OOM
 * figures agree with each other.  A file that breaks one is refused with
 * one line naming the file and the rule (the same name as in the doc),
 * rather than shown as numbers that contradict each other ("at_peak is
 * 994980430394.4% of the peak").
 *
 * Only what the writer keeps exactly is checked (every snapshot of the
 * test suite, and the golden inputs, hold all of these).  Sums relating an
 * array to a number are checked only when the file has the array: a field
 * the file leaves out reads as unknown, not as a contradiction.
 */
#include "snapshot_check.h"
#include "snapshot_phases.h"
#include "snapshot_layout.h"
#include "snapshot_tensors.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128; /* sums of 64-bit sizes cannot overflow it */

/* A u128 sum as decimal (it may exceed 64 bits). */
static const char *u128_text(u128 v, char buf[48])
{
    char *p = buf + 47;
    *p = '\0';
    do {
        *--p = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v != 0);
    return p;
}

static u128 group_bytes(const struct snap_groups *g, int kind)
{
    u128 sum = 0;
    for (size_t i = 0; i < g->n; i++)
        if (kind < 0 || g->v[i].kind == kind)
            sum += g->v[i].bytes;
    return sum;
}

static u128 group_count(const struct snap_groups *g)
{
    u128 sum = 0;
    for (size_t i = 0; i < g->n; i++)
        sum += g->v[i].count;
    return sum;
}

static int stack_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct snap_stack *)a)->id;
    int64_t y = ((const struct snap_stack *)b)->id;
    return (x > y) - (x < y);
}

static int device_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct snap_device *)a)->ordinal;
    int64_t y = ((const struct snap_device *)b)->ordinal;
    return (x > y) - (x < y);
}

/* Stacks are looked up by id with a binary search. */
static int sort_stacks(struct snapshot *s, struct cli_error *err)
{
    bool sorted = true;
    for (size_t i = 1; i < s->nstacks && sorted; i++)
        if (s->stacks[i - 1].id >= s->stacks[i].id)
            sorted = false;
    if (sorted)
        return 0;
    qsort(s->stacks, s->nstacks, sizeof *s->stacks, stack_cmp);
    for (size_t i = 1; i < s->nstacks; i++)
        if (s->stacks[i - 1].id == s->stacks[i].id)
            return errors_set(err, CLI_EVALUE,
                              "cannot read snapshot '%s': stack id %lld is defined twice",
                              s->file, (long long)s->stacks[i].id);
    return 0;
}

static int resolve_groups(struct snapshot *s, struct cli_error *err, struct snap_groups *g,
                          const char *where)
{
    for (size_t i = 0; i < g->n; i++) {
        struct snap_group *e = &g->v[i];
        if (e->stack_id == 0)
            continue;
        e->stack = snapshot_stack_index(s, e->stack_id);
        if (e->stack == SNAP_NO_STACK)
            return errors_set(err, CLI_EBADREF,
                              "cannot read snapshot '%s': %s[%zu] refers to stack %lld, "
                              "which \"stacks\" does not define",
                              s->file, where, i, (long long)e->stack_id);
    }
    return 0;
}

static int resolve(struct snapshot *s, struct cli_error *err)
{
    char where[64];
    for (size_t d = 0; d < s->ndevices; d++) {
        snprintf(where, sizeof where, "devices[%zu].live", d);
        if (resolve_groups(s, err, &s->devices[d].live, where))
            return err->code;
        snprintf(where, sizeof where, "devices[%zu].at_peak", d);
        if (resolve_groups(s, err, &s->devices[d].at_peak, where))
            return err->code;
        snprintf(where, sizeof where, "devices[%zu].churn", d);
        if (resolve_groups(s, err, &s->devices[d].churn, where))
            return err->code;
    }
    if (resolve_groups(s, err, &s->host.live, "host_pinned.live") ||
        resolve_groups(s, err, &s->host.at_peak, "host_pinned.at_peak") ||
        resolve_groups(s, err, &s->oom.live, "oom.live") ||
        resolve_groups(s, err, &s->oom.released, "oom.released"))
        return err->code;
    if (s->oom.present && s->oom.stack_id > 0) {
        s->oom.stack = snapshot_stack_index(s, s->oom.stack_id);
        if (s->oom.stack == SNAP_NO_STACK)
            return errors_set(err, CLI_EBADREF,
                              "cannot read snapshot '%s': oom.stack refers to stack %lld, "
                              "which \"stacks\" does not define",
                              s->file, (long long)s->oom.stack_id);
    }
    return 0;
}

/* ---- invariants ---- */

/* current <= peak, frees <= allocs for one set of counters. */
static int check_stats(const struct snapshot *s, struct cli_error *err, const char *where,
                       const struct snap_kind_stats *k)
{
    if (k->current_bytes > k->peak_bytes)
        return snapshot_broken(s, err, "current <= peak",
                      "%s.current_bytes %" PRIu64 " > %s.peak_bytes %" PRIu64, where,
                      k->current_bytes, where, k->peak_bytes);
    if (k->frees > k->allocs)
        return snapshot_broken(s, err, "frees <= allocs",
                      "%s.frees %" PRIu64 " > %s.allocs %" PRIu64, where, k->frees, where,
                      k->allocs);
    return 0;
}

/* The groups sum to a figure exactly ("at_peak sums to peak_bytes"). */
static int check_sum(const struct snapshot *s, struct cli_error *err, const char *rule,
                     const char *where, const char *groups, const struct snap_groups *g,
                     int kind, const char *figure, uint64_t value)
{
    if (!g->present)
        return 0;
    u128 sum = group_bytes(g, kind);
    if (sum == value)
        return 0;
    char buf[48];
    return snapshot_broken(s, err, rule, "%s.%s%s%s sums to %s bytes, %s.%s is %" PRIu64, where,
                  groups, kind >= 0 ? " of kind " : "", kind >= 0 ? snapshot_kind_name(kind) : "",
                  u128_text(sum, buf), where, figure, value);
}

/* The roles of an allocator's figures add up to its allocated bytes. */
static int check_roles(const struct snapshot *s, struct cli_error *err, const char *where,
                       const struct snap_allocator *a)
{
    if (!a->present || !a->has_roles)
        return 0;
    u128 sum = 0;
    for (int i = 0; i < SNAP_ROLES; i++)
        sum += a->roles[i];
    if (a->allocated_bytes != SNAP_UNKNOWN && sum == a->allocated_bytes)
        return 0;
    char buf[48];
    return snapshot_broken(s, err, "roles sum to allocated_bytes",
                  "%s.allocator.roles sum to %s bytes, allocated_bytes is %s%" PRIu64, where,
                  u128_text(sum, buf), a->allocated_bytes == SNAP_UNKNOWN ? "unknown: " : "",
                  a->allocated_bytes == SNAP_UNKNOWN ? (uint64_t)0 : a->allocated_bytes);
}

static int check_kinds(const struct snapshot *s, struct cli_error *err, const char *where,
                       const struct snap_device *d)
{
    const char *const *names = snapshot_kind_names; /* the by_kind keys first */
    char at[64];
    u128 cur = 0, peaks = 0;
    uint64_t max_peak = 0;
    for (int k = 0; k < DEVICE_KINDS; k++) {
        const struct snap_kind_stats *st = &d->by_kind[k];
        snprintf(at, sizeof at, "%s.by_kind.%s", where, names[k]);
        int rc = check_stats(s, err, at, st);
        if (rc != 0)
            return rc;
        cur += st->current_bytes;
        peaks += st->peak_bytes;
        if (st->peak_bytes > max_peak)
            max_peak = st->peak_bytes;
        char figure[48];
        snprintf(figure, sizeof figure, "by_kind.%s.current_bytes", names[k]);
        rc = check_sum(s, err, "live by kind sums to by_kind current_bytes", where, "live",
                       &d->live, k, figure, st->current_bytes);
        if (rc != 0)
            return rc;
    }
    char buf[48];
    if (cur != d->current_bytes)
        return snapshot_broken(s, err, "current_bytes is the sum of by_kind",
                      "%s.by_kind current_bytes sum to %s, %s.current_bytes is %" PRIu64,
                      where, u128_text(cur, buf), where, d->current_bytes);
    if (max_peak > d->peak_bytes)
        return snapshot_broken(s, err, "no kind peaks above the device",
                      "a %s.by_kind peak_bytes is %" PRIu64 ", %s.peak_bytes is %" PRIu64,
                      where, max_peak, where, d->peak_bytes);
    if (peaks < d->peak_bytes)
        return snapshot_broken(s, err, "the device peaks at most at the sum of its kinds' peaks",
                      "%s.by_kind peak_bytes sum to %s, %s.peak_bytes is %" PRIu64, where,
                      u128_text(peaks, buf), where, d->peak_bytes);
    return 0;
}

static int check_device(const struct snapshot *s, struct cli_error *err, size_t i)
{
    const struct snap_device *d = &s->devices[i];
    char where[40];
    snprintf(where, sizeof where, "devices[%zu]", i);
    if (d->ordinal < 0)
        return snapshot_broken(s, err, "ordinals are unique and non-negative",
                      "%s.ordinal is %" PRId64, where, d->ordinal);
    if (d->current_bytes > d->peak_bytes)
        return snapshot_broken(s, err, "current <= peak",
                      "%s.current_bytes %" PRIu64 " > %s.peak_bytes %" PRIu64, where,
                      d->current_bytes, where, d->peak_bytes);
    if (d->total_bytes != SNAP_UNKNOWN && d->free_bytes != SNAP_UNKNOWN &&
        d->free_bytes > d->total_bytes)
        return snapshot_broken(s, err, "free <= total",
                      "%s.free_bytes %" PRIu64 " > %s.total_bytes %" PRIu64, where,
                      d->free_bytes, where, d->total_bytes);
    int rc = check_sum(s, err, "at_peak sums to peak_bytes", where, "at_peak", &d->at_peak,
                       -1, "peak_bytes", d->peak_bytes);
    if (rc == 0)
        rc = check_sum(s, err, "live sums to current_bytes", where, "live", &d->live, -1,
                       "current_bytes", d->current_bytes);
    if (rc == 0 && d->by_kind_present)
        rc = check_kinds(s, err, where, d);
    if (rc == 0)
        rc = check_roles(s, err, where, &d->allocator);
    if (rc != 0)
        return rc;
    const struct snap_vmm *v = &d->vmm;
    if (v->present && (v->reserved_bytes > v->reserved_peak_bytes ||
                       v->mapped_bytes > v->mapped_peak_bytes))
        return snapshot_broken(s, err, "current <= peak",
                      "%s.vmm reserved/mapped %" PRIu64 "/%" PRIu64 " above their peaks %"
                      PRIu64 "/%" PRIu64, where, v->reserved_bytes, v->mapped_bytes,
                      v->reserved_peak_bytes, v->mapped_peak_bytes);
    if (v->present && v->mapped_bytes > v->reserved_bytes)
        return snapshot_broken(s, err, "mapped <= reserved",
                      "%s.vmm.mapped_bytes %" PRIu64 " > reserved_bytes %" PRIu64, where,
                      v->mapped_bytes, v->reserved_bytes);
    const struct snap_frag *f = &d->frag;
    if (f->present && (f->rounded_bytes < f->requested_bytes ||
                       f->small_bytes > f->requested_bytes))
        return snapshot_broken(s, err, "requested <= rounded, small <= requested",
                      "%s.fragmentation requested %" PRIu64 ", rounded %" PRIu64
                      ", small %" PRIu64, where, f->requested_bytes, f->rounded_bytes,
                      f->small_bytes);
    if (d->nhist > 0 && d->live.present) {
        u128 hb = 0, hc = 0;
        for (size_t b = 0; b < d->nhist; b++)
            hb += d->hist[b].bytes, hc += d->hist[b].count;
        if (hb != group_bytes(&d->live, -1) || hc != group_count(&d->live)) {
            char x[48], y[48];
            return snapshot_broken(s, err, "the histogram counts the live allocations",
                          "%s.histogram holds %s bytes in %s allocations, %s.live differs",
                          where, u128_text(hb, x), u128_text(hc, y), where);
        }
    }
    return 0;
}

/* Each device in file order (messages name devices[i] as in the file),
 * then sorted by ordinal, which the format promises and views rely on (a
 * file out of order is sorted, not refused; a repeated ordinal is). */
static int check_devices(struct snapshot *s, struct cli_error *err)
{
    for (size_t i = 0; i < s->ndevices; i++) {
        int rc = check_device(s, err, i);
        if (rc != 0)
            return rc;
    }
    if (s->ndevices > 1)
        qsort(s->devices, s->ndevices, sizeof *s->devices, device_cmp);
    for (size_t i = 1; i < s->ndevices; i++)
        if (s->devices[i].ordinal == s->devices[i - 1].ordinal)
            return snapshot_broken(s, err, "ordinals are unique and non-negative",
                          "device ordinal %" PRId64 " appears twice", s->devices[i].ordinal);
    return 0;
}

static int check_host(const struct snapshot *s, struct cli_error *err)
{
    const struct snap_host *h = &s->host;
    if (!h->present)
        return 0;
    int rc = check_stats(s, err, "host_pinned", &h->stats);
    if (rc == 0)
        rc = check_sum(s, err, "at_peak sums to peak_bytes", "host_pinned", "at_peak",
                       &h->at_peak, -1, "peak_bytes", h->stats.peak_bytes);
    if (rc == 0)
        rc = check_sum(s, err, "live sums to current_bytes", "host_pinned", "live", &h->live,
                       -1, "current_bytes", h->stats.current_bytes);
    return rc;
}

static int check_oom(const struct snapshot *s, struct cli_error *err)
{
    const struct snap_oom *o = &s->oom;
    bool oom_reason = s->reason != NULL && strcmp(s->reason, "oom") == 0;
    if (o->present != oom_reason)
        return snapshot_broken(s, err, "oom is present exactly when reason is \"oom\"",
                      "reason is %s%s%s and oom is %s", s->reason ? "\"" : "",
                      s->reason ? s->reason : "missing", s->reason ? "\"" : "",
                      o->present ? "an object" : "null or missing");
    if (!o->present)
        return 0;
    int rc = check_roles(s, err, "oom", &o->allocator);
    if (rc != 0)
        return rc;
    if (o->device < -1 || (o->device >= 0 && snapshot_device(s, o->device) == NULL))
        return snapshot_broken(s, err, "oom.device is -1 or a listed device",
                      "oom.device is %" PRId64 ", which \"devices\" does not list", o->device);
    u128 kinds = 0;
    for (int k = 0; k < DEVICE_KINDS; k++)
        kinds += o->by_kind[k];
    char buf[48];
    if (kinds != o->tracked_bytes)
        return snapshot_broken(s, err, "oom.by_kind sums to tracked_bytes",
                      "oom.by_kind sums to %s, oom.tracked_bytes is %" PRIu64,
                      u128_text(kinds, buf), o->tracked_bytes);
    if (o->total_bytes == SNAP_UNKNOWN || o->free_bytes == SNAP_UNKNOWN)
        return 0;
    u128 used = o->total_bytes > o->free_bytes ? o->total_bytes - o->free_bytes : 0;
    u128 untracked = used > o->tracked_bytes ? used - o->tracked_bytes : 0;
    if (o->untracked_bytes != SNAP_UNKNOWN && o->untracked_bytes != untracked)
        return snapshot_broken(s, err, "untracked = total - free - tracked, floored at 0",
                      "oom.untracked_bytes is %" PRIu64 ", total - free - tracked is %s",
                      o->untracked_bytes, u128_text(untracked, buf));
    if ((o->cause == CAUSE_EXHAUSTED || o->cause == CAUSE_OTHER_PROCESSES) &&
        (o->free_bytes >= o->requested_bytes ||
         o->shortfall_bytes != o->requested_bytes - o->free_bytes))
        return snapshot_broken(s, err, "exhausted: free < requested, shortfall = requested - free",
                      "oom.free_bytes %" PRIu64 ", requested_bytes %" PRIu64
                      ", shortfall_bytes %" PRIu64, o->free_bytes, o->requested_bytes,
                      o->shortfall_bytes);
    if (o->cause == CAUSE_OTHER_PROCESSES && o->untracked_bytes != SNAP_UNKNOWN &&
        o->untracked_bytes <= o->shortfall_bytes)
        return snapshot_broken(s, err, "other_processes: untracked > shortfall",
                      "oom.untracked_bytes %" PRIu64 " <= shortfall_bytes %" PRIu64,
                      o->untracked_bytes, o->shortfall_bytes);
    if (o->cause == CAUSE_REFUSED_WHILE_FREE && o->free_bytes < o->requested_bytes)
        return snapshot_broken(s, err, "refused_while_free: free >= requested",
                      "oom.free_bytes %" PRIu64 " < requested_bytes %" PRIu64, o->free_bytes,
                      o->requested_bytes);
    return 0;
}

static int check_counts(const struct snapshot *s, struct cli_error *err)
{
    const struct snap_ooms *o = &s->ooms;
    if (o->recovered > o->count || o->count > o->failed_attempts)
        return snapshot_broken(s, err, "recovered <= count <= failed_attempts",
                      "ooms.recovered %" PRIu64 ", count %" PRIu64 ", failed_attempts %"
                      PRIu64, o->recovered, o->count, o->failed_attempts);
    if (s->counters.present) {
        bool all = s->host.present ? s->host.live.present : true;
        u128 live = s->host.present ? group_count(&s->host.live) : 0;
        for (size_t i = 0; i < s->ndevices; i++) {
            all = all && s->devices[i].live.present;
            live += group_count(&s->devices[i].live);
        }
        char buf[48];
        if (all && live != s->counters.live_allocations)
            return snapshot_broken(s, err, "live_allocations counts the live groups",
                          "counters.live_allocations is %" PRIu64
                          ", the live groups hold %s allocations",
                          s->counters.live_allocations, u128_text(live, buf));
    }
    for (size_t i = 0; i < s->config.nlimits; i++)
        for (size_t j = 0; j < i; j++)
            if (s->config.limits[i].device == s->config.limits[j].device)
                return snapshot_broken(s, err, "one limit per device",
                              "config.limit_bytes names device %" PRId64 " twice",
                              s->config.limits[i].device);
    const struct snap_events *e = &s->events;
    if (e->recorded != SNAP_UNKNOWN && e->rows > e->recorded)
        return snapshot_broken(s, err, "events kept <= recorded",
                      "events.data holds %zu rows, events.recorded is %" PRIu64, e->rows,
                      e->recorded);
    return 0;
}

int snapshot_check(struct snapshot *s, struct cli_error *err)
{
    int rc = sort_stacks(s, err);
    if (rc == 0)
        rc = resolve(s, err);
    if (rc != 0)
        return rc;
    rc = check_devices(s, err);
    if (rc == 0)
        rc = check_host(s, err);
    if (rc == 0)
        rc = check_oom(s, err);
    if (rc == 0)
        rc = snapshot_layout_check(s, err);
    if (rc == 0)
        rc = check_counts(s, err);
    if (rc == 0)
        rc = snapshot_phases_check(s, err);
    if (rc == 0)
        rc = snapshot_tensors_check(s, err);
    return rc;
}
