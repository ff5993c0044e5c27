/* serialise.c - the one serialiser of the tracker's state.
 *
 * Every snapshot file (snapshot_write.c: exit, oom, signal, api, periodic,
 * exec) and every stream checkpoint (stream.c) is the document written
 * here, so they cannot drift apart.  It reads the state and writes; it
 * decides nothing about when or where: OOM bookkeeping (oom_ledger.c) and
 * the caching allocator's figures (allocator.c) feed it, and the callers
 * that decide to dump (oom.c, init.c, signals.c, periodic.c, stream.c)
 * call it through snapshot_write.c or directly.
 *
 * Order: take a consistent copy of the tracker under its lock
 * (record_view_take), release it, then write without holding anything the
 * host's threads could wait on.  The document's sections are written in
 * the order of write_document(), the one place a new section goes.
 */
#include "serialise.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator.h"
#include "allocator_segments.h"
#include "allocator_tensors.h"
#include "clock.h"
#include "config.h"
#include "format.h"
#include "snapshot_json.h"
#include "layout.h"
#include "oom_ledger.h"
#include "output.h"
#include "resolve.h"
#include "serialise_phases.h"
#include "serialise_stacks.h"
#include "torch_protocol.h"

/* key (a literal such as ",\"peak_bytes\":") then the number */
static void key_u64(struct snapshot_json *w, const char *key, uint64_t v)
{
    snapshot_json_s(w, key);
    snapshot_json_u64(w, v);
}

static void key_i64(struct snapshot_json *w, const char *key, int64_t v)
{
    snapshot_json_s(w, key);
    snapshot_json_i64(w, v);
}

/* negative is written as null (a figure not known) */
static void key_or_null(struct snapshot_json *w, const char *key, int64_t v)
{
    snapshot_json_s(w, key);
    snapshot_json_i64_or_null(w, v);
}

static void key_str(struct snapshot_json *w, const char *key, const char *v)
{
    snapshot_json_s(w, key);
    snapshot_json_str(w, v);
}

static void key_bool(struct snapshot_json *w, const char *key, bool v)
{
    snapshot_json_s(w, key);
    snapshot_json_bool(w, v);
}

/* ---- process and configuration ---- */

static void write_process(struct snapshot_json *w, int64_t now)
{
    key_i64(w, "\"process\":{\"pid\":", getpid());
    key_i64(w, ",\"ppid\":", getppid());
    key_str(w, ",\"exe\":", output_process.exe);
    snapshot_json_s(w, ",\"cmdline\":[");
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[8192];
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len > 0) {
            buf[len] = '\0';
            for (ssize_t off = 0; off < len; off += (ssize_t)strlen(buf + off) + 1)
                key_str(w, off ? "," : "", buf + off);
        }
    }
    key_str(w, "],\"host\":", output_process.host);
    key_or_null(w, ",\"rank\":", output_process.rank);
    key_or_null(w, ",\"local_rank\":", output_process.local_rank);
    key_or_null(w, ",\"world_size\":", output_process.world_size);
    key_i64(w, ",\"start_wall_ns\":", output_process.start_wall_ns);
    key_i64(w, ",\"dump_time_ns\":", now);
    snapshot_json_s(w, ",\"tool_version\":\"" FORMAT_TOOL_VERSION "\"},\n");
}

static void write_config(struct snapshot_json *w)
{
    key_u64(w, "\"config\":{\"depth\":", config.depth);
    key_u64(w, ",\"event_cap\":", config.event_cap);
    snapshot_json_s(w, ",\"limit_bytes\":[");
    bool first = true;
    for (int d = 0; d < RECORD_MAX_DEVICES; d++) {
        uint64_t l = record_limit(d);
        if (l == 0 || (l == config.limit_all && d > 0))
            continue;
        key_i64(w, first ? "{\"device\":" : ",{\"device\":", d);
        key_u64(w, ",\"bytes\":", l);
        snapshot_json_s(w, "}");
        first = false;
    }
    key_bool(w, "],\"python\":", config.python);
    key_bool(w, ",\"native\":", config.native);
    key_u64(w, ",\"temporary_ms\":", config.temporary_ms);
    snapshot_json_s(w, "},\n");
}

static void write_kind_stats(struct snapshot_json *w, const struct record_kind_stats *k)
{
    key_u64(w, "{\"current_bytes\":", k->current);
    key_u64(w, ",\"peak_bytes\":", k->peak);
    key_i64(w, ",\"peak_time_ns\":", k->peak_time);
    key_u64(w, ",\"allocs\":", k->allocs);
    key_u64(w, ",\"frees\":", k->frees);
    key_u64(w, ",\"failures\":", k->failures);
    snapshot_json_s(w, "}");
}

/* ---- call sites ---- */

/* The order sites are written in: by a figure, largest first, then by
 * stack id - a stable order, so two dumps of the same state are the same
 * file.  Sorting these small keys rather than the sites themselves keeps a
 * 100k-site sort in cache (the sites' stack ids are a pointer away). */
struct site_key {
    uint64_t by;   /* the figure ordered by */
    uint32_t id;   /* stack id */
    uint32_t at;   /* index in v->sites */
};

enum order_by { BY_CURRENT, BY_AT_PEAK, BY_MARK_AT_PEAK, BY_ALLOCS };

/* Sorts keys[0..n), already in id order, by figure, largest first, keeping
 * the id order among equals (and, for one stack's sites of two kinds, the
 * sites' order): a stable LSD radix sort of the complemented figure, one
 * pass per byte in which the figures differ (qsort's three sorts were most
 * of a large dump's cost).  tmp: room for n. */
static void radix_by_figure(struct site_key *keys, struct site_key *tmp, size_t n)
{
    /* the bytes in which some figures differ; only they are passes */
    uint64_t all = keys[0].by, any = keys[0].by;
    for (size_t i = 1; i < n; i++) {
        all &= keys[i].by;
        any |= keys[i].by;
    }
    uint64_t differ = all ^ any;
    uint32_t count[8][256]; /* n < 2^32: keys index sites by uint32_t */
    memset(count, 0, sizeof count);
    for (int b = 0; b < 8; b++) {
        if ((differ >> (8 * b) & 255) == 0)
            continue;
        for (size_t i = 0; i < n; i++)
            count[b][(~keys[i].by >> (8 * b)) & 255]++;
    }
    struct site_key *from = keys, *to = tmp;
    for (int b = 0; b < 8; b++) {
        uint32_t *c = count[b];
        if ((differ >> (8 * b) & 255) == 0)
            continue; /* every key has this byte */
        uint32_t sum = 0;
        for (int d = 0; d < 256; d++) {
            uint32_t k = c[d];
            c[d] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++)
            to[c[(~from[i].by >> (8 * b)) & 255]++] = from[i];
        struct site_key *t = from;
        from = to;
        to = t;
    }
    if (from != keys)
        memcpy(keys, from, n * sizeof *keys);
}

/* Fills keys[0..n) with the sites of `pool` in the order `by`; returns n.
 * keys has room for twice every site (the caller's scratch; the second
 * half is the sort's).  The view lists the sites stack by stack in id
 * order (record_view_take walks the stacks by id), so keys start in it. */
static size_t order_sites(const struct record_view *v, uint32_t pool, enum order_by by,
                          struct site_key *keys)
{
    size_t n = 0;
    for (size_t i = 0; i < v->nsites; i++) {
        const struct record_site_view *s = &v->sites[i];
        if (s->pool != pool)
            continue;
        keys[n].by = by == BY_CURRENT    ? s->current
                     : by == BY_AT_PEAK  ? s->at_peak
                     : by == BY_ALLOCS   ? s->allocs
                                         : s->mark_at_peak;
        keys[n].id = s->stack->id;
        keys[n].at = (uint32_t)i;
        n++;
    }
    if (n > 1)
        radix_by_figure(keys, keys + v->nsites, n);
    return n;
}

enum groups_of { GROUPS_LIVE, GROUPS_AT_PEAK, GROUPS_AT_MARK_PEAK };

/* The sites of `pool` ordered by the figure `which` picks; at most `max`
 * groups (0 = all). */
static void write_groups(struct snapshot_json *w, const struct record_view *v,
                         struct site_key *keys, uint32_t pool, enum groups_of which,
                         size_t max)
{
    size_t n = 0;
    bool peak = which != GROUPS_LIVE;
    size_t nkeys = order_sites(v, pool,
                               which == GROUPS_AT_PEAK        ? BY_AT_PEAK
                               : which == GROUPS_AT_MARK_PEAK ? BY_MARK_AT_PEAK
                                                              : BY_CURRENT,
                               keys);
    snapshot_json_s(w, "[");
    for (size_t k = 0; k < nkeys; k++) {
        const struct record_site_view *s = &v->sites[keys[k].at];
        uint64_t bytes = which == GROUPS_AT_PEAK        ? s->at_peak
                         : which == GROUPS_AT_MARK_PEAK ? s->mark_at_peak
                                                        : s->current;
        uint64_t count = which == GROUPS_AT_PEAK        ? s->at_peak_count
                         : which == GROUPS_AT_MARK_PEAK ? s->mark_at_peak_count
                                                        : s->count;
        if (bytes == 0 && count == 0)
            continue;
        if (max && n == max)
            break;
        snapshot_json_s(w, n++ ? ",\n  " : "\n  ");
        key_u64(w, "{\"stack\":", keys[k].id);
        if (!peak) {
            snapshot_json_s(w, ",\"kind\":\"");
            snapshot_json_s(w, record_kind_name(s->kind));
            snapshot_json_raw(w, "\"", 1);
        }
        key_u64(w, ",\"bytes\":", bytes);
        key_u64(w, ",\"count\":", count);
        snapshot_json_raw(w, "}", 1);
    }
    snapshot_json_s(w, "]");
}

/* Per call site over the whole run: allocations, frees, bytes allocated,
 * temporary frees (docs/snapshot-format.md "churn"), most allocations first. */
static void write_churn(struct snapshot_json *w, const struct record_view *v, struct site_key *keys,
                        uint32_t pool)
{
    size_t nkeys = order_sites(v, pool, BY_ALLOCS, keys);
    snapshot_json_s(w, ",\n \"churn\":[");
    size_t n = 0;
    for (size_t k = 0; k < nkeys; k++) {
        const struct record_site_view *s = &v->sites[keys[k].at];
        if (s->allocs == 0)
            continue;
        key_u64(w, n++ ? ",\n  {\"stack\":" : "\n  {\"stack\":", keys[k].id);
        key_u64(w, ",\"allocs\":", s->allocs);
        key_u64(w, ",\"frees\":", s->frees);
        key_u64(w, ",\"bytes_allocated\":", s->alloc_bytes);
        key_u64(w, ",\"temporary\":", s->temporary);
        snapshot_json_raw(w, "}", 1);
    }
    snapshot_json_s(w, "]");
}

static void write_live_and_peak(struct snapshot_json *w, const struct record_view *v,
                                struct site_key *keys, uint32_t pool)
{
    snapshot_json_s(w, ",\"live\":");
    write_groups(w, v, keys, pool, GROUPS_LIVE, 0);
    snapshot_json_s(w, ",\"at_peak\":");
    write_groups(w, v, keys, pool, GROUPS_AT_PEAK, 0);
}

/* The peak since the innermost mark (cumemtrace_mark_begin), only while
 * one is active. */
static void write_mark(struct snapshot_json *w, const struct record_view *v, struct site_key *keys,
                       uint32_t pool)
{
    int depth = v->mark_depth;
    if (depth == 0)
        return;
    const struct record_mark *m = &v->pools[pool].mark;
    key_i64(w, ",\n \"mark\":{\"depth\":", depth);
    key_i64(w, ",\"time_ns\":", m->time);
    key_u64(w, ",\"base_bytes\":", m->base);
    key_u64(w, ",\"peak_bytes\":", m->peak);
    key_i64(w, ",\"peak_time_ns\":", m->peak_time);
    snapshot_json_s(w, ",\"at_peak\":");
    if (m->sites_valid)
        write_groups(w, v, keys, pool, GROUPS_AT_MARK_PEAK, 0);
    else
        snapshot_json_s(w, "null");
    snapshot_json_s(w, "}");
}

/* ---- devices ---- */

/* top_tensors: null without the allocator's history, else each site's
 * "file:line:function" lines as frames. */
static void write_top_tensors(struct snapshot_json *w, const struct allocator_facts *f)
{
    snapshot_json_s(w, ",\"top_tensors\":");
    if (f->ntop < 0) {
        snapshot_json_s(w, "null");
        return;
    }
    snapshot_json_s(w, "[");
    for (int i = 0; i < f->ntop; i++) {
        snapshot_json_s(w, i ? ",{\"stack\":" : "{\"stack\":");
        allocator_segments_write_stack(f->top[i].stack, w);
        key_i64(w, ",\"bytes\":", f->top[i].bytes);
        key_i64(w, ",\"count\":", f->top[i].count);
        snapshot_json_s(w, "}");
    }
    snapshot_json_s(w, "]");
}

/* roles: allocated_bytes by the role of each live block's tensor, null
 * when not measured. */
static void write_roles(struct snapshot_json *w, const struct allocator_facts *f)
{
    static const char *const keys[ALLOCATOR_ROLES] = {
        "{\"parameters\":", ",\"buffers\":", ",\"gradients\":", ",\"optimizer_state\":",
        ",\"other\":"};
    snapshot_json_s(w, ",\"roles\":");
    if (f->roles[0] < 0) {
        snapshot_json_s(w, "null");
        return;
    }
    for (int i = 0; i < ALLOCATOR_ROLES; i++)
        key_i64(w, keys[i], f->roles[i]);
    key_str(w, ",\"optimizers\":", f->optimizers[0] ? f->optimizers : NULL);
    snapshot_json_s(w, "}");
}

/* The caching allocator's own figures (null when it did not speak), its
 * configuration parsed as PyTorch reads it: "key:value,key:value".  With
 * oom_device >= 0 (a post-mortem's), also the tensors the layer handed over
 * at that OOM (tagged with its num_ooms). */
static void write_allocator(struct snapshot_json *w, const struct allocator_facts *f,
                            int oom_device)
{
    if (f == NULL) {
        snapshot_json_s(w, "null");
        return;
    }
    key_str(w, "{\"name\":", f->name);
    key_str(w, ",\"version\":", f->version[0] ? f->version : NULL);
    const struct {
        const char *key;
        int64_t v;
    } n[] = {
        {",\"requested_bytes\":", f->requested},
        {",\"allocated_bytes\":", f->allocated},
        {",\"reserved_bytes\":", f->reserved},
        {",\"active_bytes\":", f->active},
        {",\"reserved_unallocated_bytes\":", allocator_unallocated(f)},
        {",\"inactive_split_bytes\":", f->inactive_split},
        {",\"segments\":", f->segments},
        {",\"num_alloc_retries\":", f->num_alloc_retries},
        {",\"num_ooms\":", f->num_ooms},
        {",\"limit_bytes\":", f->limit},
        {",\"device_total_bytes\":", f->device_total},
        {",\"device_free_bytes\":", f->device_free},
        {",\"peak_allocated_bytes\":", f->peak_allocated},
        {",\"step\":", f->step},
        {",\"peak_step\":", f->peak_step},
        {",\"reported_ns\":", f->reported_ns},
    };
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        key_or_null(w, n[i].key, n[i].v);
    key_or_null(w, ",\"largest_free_block_bytes\":{\"small\":", f->largest_free_small);
    key_or_null(w, ",\"large\":", f->largest_free_large);
    snapshot_json_s(w, "},\"config\":{");
    char conf[ALLOCATOR_CONFIG_MAX];
    memcpy(conf, f->config, sizeof conf);
    bool first = true;
    char *save = NULL;
    for (char *item = strtok_r(conf, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        if (colon == NULL)
            continue;
        *colon = '\0';
        snapshot_json_s(w, first ? "" : ",");
        first = false;
        snapshot_json_str(w, item);
        key_str(w, ":", colon + 1);
    }
    snapshot_json_s(w, "}");
    write_top_tensors(w, f);
    write_roles(w, f);
    static const enum allocator_tensors_member at_oom[] = {ALLOCATOR_TENSORS, ALLOCATOR_ORIGIN};
    for (int i = 0; oom_device >= 0 && i < 2; i++) {
        snapshot_json_s(w, ",\"");
        snapshot_json_s(w, allocator_tensors_names[at_oom[i]]);
        snapshot_json_s(w, "\":");
        if (f->num_ooms >= 0)
            allocator_tensors_write(oom_device, f->num_ooms, at_oom[i], w);
        else
            snapshot_json_s(w, "null");
    }
    snapshot_json_s(w, "}");
}

static void write_histogram(struct snapshot_json *w, const struct record_pool_view *p)
{
    bool first = true;
    for (int b = 0; b < 65; b++) {
        if (p->hist_count[b] == 0)
            continue;
        key_u64(w, first ? "{\"le\":" : ",{\"le\":", b == 64 ? UINT64_MAX : (uint64_t)1 << b);
        key_u64(w, ",\"count\":", p->hist_count[b]);
        key_u64(w, ",\"bytes\":", p->hist_bytes[b]);
        snapshot_json_s(w, "}");
        first = false;
    }
}

static void write_device(struct snapshot_json *w, const struct record_view *v,
                         struct site_key *keys, int d)
{
    const struct record_pool_view *p = &v->pools[d];
    key_i64(w, "{\"ordinal\":", d);
    key_or_null(w, ",\"total_bytes\":", p->total_bytes);
    key_or_null(w, ",\"free_bytes\":", p->free_bytes);
    key_or_null(w, ",\"limit_bytes\":", p->limit ? (int64_t)p->limit : -1);
    key_u64(w, ",\"current_bytes\":", p->current);
    key_u64(w, ",\"peak_bytes\":", p->peak);
    key_i64(w, ",\"peak_time_ns\":", p->peak_time);
    key_u64(w, ",\"peak_phase\":", p->peak_phase);
    snapshot_json_s(w, ",\n \"by_kind\":{");
    for (int k = 0; k < FORMAT_DEVICE_KINDS; k++) {
        snapshot_json_s(w, k ? ",\"" : "\"");
        snapshot_json_s(w, record_kind_name(k));
        snapshot_json_s(w, "\":");
        write_kind_stats(w, &p->kinds[k]);
    }
    key_u64(w, "},\n \"vmm\":{\"reserved_bytes\":", p->vmm.reserved);
    key_u64(w, ",\"mapped_bytes\":", p->vmm.mapped);
    key_u64(w, ",\"physical_bytes\":", p->kinds[KIND_VMM].current);
    key_u64(w, ",\"reserved_peak_bytes\":", p->vmm.reserved_peak);
    key_u64(w, ",\"mapped_peak_bytes\":", p->vmm.mapped_peak);
    snapshot_json_s(w, "},\n \"histogram\":[");
    write_histogram(w, p);
    key_u64(w, "],\n \"fragmentation\":{\"granularity_bytes\":", RECORD_GRANULARITY);
    key_u64(w, ",\"requested_bytes\":", p->requested);
    key_u64(w, ",\"rounded_bytes\":", p->rounded);
    key_u64(w, ",\"small_count\":", p->small_count);
    key_u64(w, ",\"small_bytes\":", p->small_bytes);
    snapshot_json_s(w, "}");
    struct allocator_facts latest;
    snapshot_json_s(w, ",\n \"allocator\":");
    write_allocator(w, allocator_latest(d, &latest) ? &latest : NULL, -1);
    snapshot_json_s(w, ",\n \"allocator_segments\":");
    allocator_segments_write_state(d, w);
    /* PyTorch's tensors by the user's line, as its layer last read them */
    for (int m = 0; m < ALLOCATOR_DEVICE_MEMBERS; m++) {
        snapshot_json_s(w, ",\n \"");
        snapshot_json_s(w, allocator_tensors_names[m]);
        snapshot_json_s(w, "\":");
        allocator_tensors_write(d, CUMEMTRACE_LAYOUT_STATE, (enum allocator_tensors_member)m, w);
    }
    write_live_and_peak(w, v, keys, (uint32_t)d);
    write_churn(w, v, keys, (uint32_t)d);
    write_mark(w, v, keys, (uint32_t)d);
    serialise_phases_pool(w, v, (uint32_t)d);
    snapshot_json_s(w, "}");
}

static void write_devices(struct snapshot_json *w, const struct record_view *v,
                          struct site_key *keys)
{
    snapshot_json_s(w, "\"devices\":[");
    bool first = true;
    for (int d = 0; d < RECORD_MAX_DEVICES; d++) {
        if (!v->pools[d].active)
            continue;
        snapshot_json_s(w, first ? "\n" : ",\n");
        write_device(w, v, keys, d);
        first = false;
    }
    snapshot_json_s(w, "],\n");
}

static void write_host(struct snapshot_json *w, const struct record_view *v, struct site_key *keys)
{
    const struct record_pool_view *p = &v->pools[RECORD_HOST_POOL];
    const struct record_kind_stats *k = &p->kinds[KIND_HOST_PINNED];
    key_u64(w, "\"host_pinned\":{\"current_bytes\":", p->current);
    key_u64(w, ",\"peak_bytes\":", p->peak);
    key_i64(w, ",\"peak_time_ns\":", p->peak_time);
    key_u64(w, ",\"allocs\":", k->allocs);
    key_u64(w, ",\"frees\":", k->frees);
    key_u64(w, ",\"failures\":", k->failures);
    write_live_and_peak(w, v, keys, RECORD_HOST_POOL);
    write_churn(w, v, keys, RECORD_HOST_POOL);
    serialise_phases_pool(w, v, RECORD_HOST_POOL);
    snapshot_json_s(w, "},\n");
}

static void write_counters(struct snapshot_json *w, const struct record_view *v)
{
    key_u64(w, "\"counters\":{\"unknown_frees\":", v->counters.unknown_frees);
    key_u64(w, ",\"wrong_kind_frees\":", v->counters.wrong_kind_frees);
    key_u64(w, ",\"reentrant_untracked\":", v->counters.reentrant_untracked);
    key_u64(w, ",\"failed_frees\":", v->counters.failed_frees);
    key_u64(w, ",\"stacks\":", v->counters.stacks);
    key_u64(w, ",\"live_allocations\":", v->counters.live);
    snapshot_json_s(w, "},\n");
}

/* ---- out of memory (the ledger's records, oom_ledger.h) ---- */

static void write_released(struct snapshot_json *w, const struct oom_info *o)
{
    unsigned order[16], n = o->nreleased_by; /* largest first */
    for (unsigned i = 0; i < n; i++) {
        unsigned j = i;
        for (; j > 0 && o->released_by[order[j - 1]].bytes < o->released_by[i].bytes; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    for (unsigned i = 0; i < n; i++) {
        key_u64(w, i ? ",{\"stack\":" : "{\"stack\":", o->released_by[order[i]].stack);
        key_u64(w, ",\"bytes\":", o->released_by[order[i]].bytes);
        key_u64(w, ",\"count\":", o->released_by[order[i]].count);
        snapshot_json_s(w, "}");
    }
}

/* The failing request of a post-mortem; null in any other document.
 * Names (kind, entry point, cause) are the tracker's own literals. */
static void write_oom(struct snapshot_json *w, const struct record_view *v, struct site_key *keys,
                      const struct oom_info *o)
{
    if (o == NULL) {
        snapshot_json_s(w, "\"oom\":null,\n");
        return;
    }
    key_u64(w, "\"oom\":{\"requested_bytes\":", o->requested);
    key_i64(w, ",\"device\":", o->device);
    snapshot_json_s(w, ",\"kind\":\"");
    snapshot_json_s(w, record_kind_name(o->kind));
    snapshot_json_s(w, "\",\"entry_point\":\"");
    snapshot_json_s(w, o->by_allocator ? o->allocator.name : resolve_name(o->slot));
    key_u64(w, "\",\"thread\":", o->tid);
    key_i64(w, ",\"time_ns\":", o->time_ns);
    key_u64(w, ",\"stack\":", o->stack);
    key_u64(w, ",\"phase\":", o->phase);
    key_or_null(w, ",\"total_bytes\":", o->total_bytes);
    key_or_null(w, ",\"free_bytes\":", o->free_bytes);
    key_or_null(w, ",\"limit_bytes\":", o->limit ? (int64_t)o->limit : -1);
    key_u64(w, ",\"tracked_bytes\":", o->tracked);
    key_or_null(w, ",\"untracked_bytes\":", o->total_bytes >= 0 ? (int64_t)o->untracked : -1);
    snapshot_json_s(w, ",\"by_kind\":{");
    for (int k = 0; k < FORMAT_DEVICE_KINDS; k++) {
        snapshot_json_s(w, k ? ",\"" : "\"");
        snapshot_json_s(w, record_kind_name(k));
        key_u64(w, "\":", o->by_kind[k]);
    }
    snapshot_json_s(w, "},\"cause\":\"");
    const char *cause = format_cause_name(o->cause);
    /* never unclassified, but never a crash */
    snapshot_json_s(w, cause != NULL ? cause : "unknown");
    key_u64(w, "\",\"shortfall_bytes\":", o->shortfall);
    key_u64(w, ",\"attempts\":", o->attempts);
    key_bool(w, ",\"recovered\":", o->recovered);
    key_u64(w, ",\"released_bytes\":", o->released_bytes);
    key_u64(w, ",\"released_count\":", o->released_count);
    snapshot_json_s(w, ",\"released\":[");
    write_released(w, o);
    snapshot_json_s(w, "],\"allocator\":");
    write_allocator(w, o->has_allocator ? &o->allocator : NULL, o->device);
    snapshot_json_s(w, ",\n \"layout\":");
    layout_write(o->device, o->requested, o->has_allocator ? o->allocator.num_ooms : -1, w);
    snapshot_json_s(w, ",\"live\":");
    write_groups(w, v, keys, o->device < 0 ? RECORD_HOST_POOL : (uint32_t)o->device,
                 GROUPS_LIVE, 50);
    snapshot_json_s(w, "},\n");
}

/* The process's OOM totals and attempts, in every document. */
static void write_ooms(struct snapshot_json *w)
{
    struct oom_summary *s = malloc(sizeof *s);
    if (s == NULL) {
        snapshot_json_s(w, "\"ooms\":{\"count\":0,\"failed_attempts\":0,\"recovered\":0,"
                           "\"retry_released_bytes\":0,\"dumps\":[]},\n");
        return;
    }
    oom_ledger_summary(s);
    key_u64(w, "\"ooms\":{\"count\":", s->count);
    key_u64(w, ",\"failed_attempts\":", s->failed_attempts);
    key_u64(w, ",\"recovered\":", s->recovered);
    key_u64(w, ",\"retry_released_bytes\":", s->retry_released_bytes);
    key_u64(w, ",\"suppressed\":", s->suppressed);
    snapshot_json_s(w, ",\"dumps\":[");
    for (unsigned i = 0; i < s->ndumps; i++) {
        key_str(w, i ? "," : "", s->dumps[i]);
    }
    snapshot_json_s(w, "],\n \"attempts\":[");
    for (unsigned i = 0; i < s->nattempts; i++) {
        const struct oom_attempt *a = &s->attempts[i];
        key_i64(w, i ? ",{\"t_ns\":" : "{\"t_ns\":", a->t_ns);
        key_i64(w, ",\"device\":", a->device);
        key_u64(w, ",\"requested_bytes\":", a->requested);
        key_u64(w, ",\"chain\":", a->chain);
        key_u64(w, ",\"attempt\":", a->attempt);
        snapshot_json_s(w, a->recovered ? ",\"outcome\":\"recovered\"}"
                                        : ",\"outcome\":\"failed\"}");
    }
    snapshot_json_s(w, "]},\n");
    free(s);
}

/* ---- events ---- */

/* Rows of the event log from `from` on (a stream checkpoint writes none
 * in JSON: its rows go to the stream's binary records, struct record_rows). */
static void write_events(struct snapshot_json *w, const struct record_view *v, size_t from)
{
    /* stride: how many events each kept row stands for, on average */
    uint64_t stride = 1;
    if (v->event_bucket_ns != 0 && v->nevents > 0)
        stride = (v->events_recorded + v->nevents - 1) / v->nevents;
    key_u64(w, "\"events\":{\"cap\":", v->event_cap);
    key_u64(w, ",\"recorded\":", v->events_recorded);
    key_u64(w, ",\"stride\":", stride);
    key_bool(w, ",\"thinned\":", v->event_bucket_ns != 0);
    key_u64(w, ",\"bucket_ns\":", v->event_bucket_ns);
    snapshot_json_s(w, ",\"columns\":[\"t_ns\",\"device\",\"kind\",\"delta\",\"stack\","
                       "\"current\"],\"data\":[");
    for (size_t i = from; i < v->nevents; i++) {
        const struct record_event *e = &v->events[i];
        snapshot_json_s(w, i > from ? ",\n [" : "\n [");
        snapshot_json_i64(w, e->t_ns);
        snapshot_json_raw(w, ",", 1);
        snapshot_json_i64(w, e->pool);
        snapshot_json_s(w, ",\"");
        snapshot_json_s(w, record_kind_name(e->kind));
        snapshot_json_s(w, "\",");
        snapshot_json_i64(w, e->delta);
        snapshot_json_raw(w, ",", 1);
        snapshot_json_u64(w, e->stack);
        snapshot_json_raw(w, ",", 1);
        snapshot_json_u64(w, e->current);
        snapshot_json_raw(w, "]", 1);
    }
    snapshot_json_s(w, "]},\n");
}

/* ---- the document ---- */

/* What became of the refresh of the allocator's figures asked for before
 * this dump (life/torch_layer.c), when one was asked for. */
static void write_refresh(struct snapshot_json *w)
{
    struct allocator_refresh r;
    if (!allocator_refresh_take(&r))
        return;
    key_bool(w, "\"allocator_refresh\":{\"answered\":", r.answered);
    key_bool(w, ",\"direct\":", r.direct);
    key_i64(w, ",\"asked_ns\":", r.asked_ns);
    key_i64(w, ",\"waited_ns\":", r.waited_ns);
    key_i64(w, ",\"wait_ms\":", r.wait_ms);
    snapshot_json_s(w, "},\n");
}

/* The sections, in the order docs/snapshot-format.md lists them; a new
 * section is one call here. */
static void write_document(struct snapshot_json *w, const struct record_view *v,
                           struct site_key *keys, const struct serialise_doc *doc,
                           int64_t now, size_t events_from)
{
    key_i64(w, "{\"format\":\"cumemtrace\",\"version\":", FORMAT_VERSION);
    snapshot_json_s(w, ",\"reason\":\"");
    snapshot_json_s(w, doc->reason);
    key_u64(w, "\",\"sequence\":", doc->sequence);
    snapshot_json_s(w, ",\n");
    if (doc->signame != NULL) {
        snapshot_json_s(w, "\"signal\":\"");
        snapshot_json_s(w, doc->signame);
        snapshot_json_s(w, "\",\n");
    }
    write_refresh(w);
    write_process(w, now);
    write_config(w);
    write_devices(w, v, keys);
    write_host(w, v, keys);
    write_counters(w, v);
    write_oom(w, v, keys, doc->oom);
    write_ooms(w);
    serialise_phases(w);
    write_events(w, v, events_from);
    serialise_stacks(w, v, doc->checkpoint);
    snapshot_json_s(w, "}\n");
}

static void peak_of(const struct record_view *v, struct serialise_said *said)
{
    said->peak_device = -1;
    said->peak_bytes = 0;
    for (int d = 0; d < RECORD_MAX_DEVICES; d++)
        if (v->pools[d].active && v->pools[d].peak >= said->peak_bytes) {
            said->peak_bytes = v->pools[d].peak;
            said->peak_device = d;
        }
}

int serialise_state(int fd, const struct serialise_doc *doc, struct record_rows *ev,
                    struct serialise_said *said)
{
    struct record_view v;
    if (record_view_take_fresh(&v, ev) != 0) {
        errno = ENOMEM;
        return -1;
    }
    struct snapshot_json *w = malloc(sizeof *w);
    /* keys, then the radix sort's scratch */
    struct site_key *keys = malloc((v.nsites ? 2 * v.nsites : 1) * sizeof *keys);
    if (w == NULL || keys == NULL) {
        free(w);
        free(keys);
        record_view_free(&v);
        errno = ENOMEM;
        return -1;
    }
    snapshot_json_init(w, fd);
    int64_t now = clock_now_ns();
    write_document(w, &v, keys, doc, now, ev != NULL ? v.nevents : 0);
    snapshot_json_flush(w);
    int err = w->err;
    free(keys);
    free(w);
    if (said != NULL) {
        said->time_ns = now;
        peak_of(&v, said);
    }
    record_view_free(&v);
    errno = err;
    return err == 0 ? 0 : -1;
}
