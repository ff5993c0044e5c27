/* snapshot_sections.c - the snapshot's small sections (docs/snapshot-format.md):
 * process, config, devices with their groups, host_pinned, counters, oom,
 * ooms, and the top-level table that dispatches to them and to the two bulk
 * sections (snapshot_bulk.c).  Each section is a field table read by
 * reader.c; what a missing field reads as is set in snapshot_sections_init.
 */
#include "snapshot_sections.h"

#include <string.h>

#include "json_lane.h"
#include "snapshot_allocator.h"
#include "snapshot_bulk.h"
#include "snapshot_layout.h"
#include "snapshot_phases.h"
#include "snapshot_tensors.h"

/* ---- groups ---- */

/* Every key of a group, stack first: what rd_group reads key by key when
 * the fast lane gives up, each key at most once (reader_object tracks 64
 * fields); the lane takes "kind" apart and the others by this table. */
#define GROUP_SCHEMA(X) \
    SNAP_GROUP_STACK_SCHEMA(X) SNAP_GROUP_SCHEMA(X) SNAP_CHURN_SCHEMA(X) SNAP_GROUP_KIND_SCHEMA(X)
#define GROUP_NAME_LEN(st, key, member, type, json) sizeof #key - 1,
static const struct field group_fields[] = {GROUP_SCHEMA(SCHEMA_FIELD)};
/* for fast_group's key match: a key of another length is no candidate */
static const size_t group_name_len[] = {GROUP_SCHEMA(GROUP_NAME_LEN)};
#undef GROUP_NAME_LEN
_Static_assert(NFIELDS(group_fields) <= 63, "reader_object and fast_group find every key");

static void group_init(struct snap_group *e)
{
    memset(e, 0, sizeof *e);
    e->stack = SNAP_NO_STACK;
    e->kind = KIND_DEVICE;
}

/* A group as the library writes it, read in one go (a snapshot has one
 * per call site and section): keys of group_fields and "kind", each once,
 * plain integers, the stack or the kind also null, no escapes.  Returns
 * false for anything else, having consumed nothing: rd_group then reads
 * the object key by key and gives the message (json_lane.h). */
static bool fast_group(struct reader *r, struct snap_group *e)
{
    const char *end = r->c.end, *p = lane_ws(r->c.p), *q;
    if (r->c.status != JSON_OK || *p != '{')
        return false;
    p = lane_ws(p + 1);
    uint64_t seen = 0; /* bit j: group_fields[j]; the top bit: kind */
    for (;;) {
        const char *key, *k;
        size_t kn, n;
        if ((p = lane_span(p, end, &key, &kn)) == NULL)
            return false;
        p = lane_ws(p);
        if (*p != ':')
            return false;
        p = lane_ws(p + 1);
        if (reader_key_is(key, kn, "kind")) {
            if (seen & (UINT64_C(1) << 63))
                return false;
            seen |= UINT64_C(1) << 63;
            if ((q = lane_span(p, end, &k, &n)) != NULL)
                e->kind = (uint8_t)snapshot_kind_span(k, n);
            else if ((q = lane_null(p)) == NULL)
                return false;
        } else {
            size_t j = 0;
            while (j < NFIELDS(group_fields) &&
                   (kn != group_name_len[j] || !reader_key_is(key, kn, group_fields[j].name)))
                j++;
            if (j == NFIELDS(group_fields) || (seen & (UINT64_C(1) << j)))
                return false;
            seen |= UINT64_C(1) << j;
            void *at = (char *)e + group_fields[j].off;
            if (group_fields[j].type == F_U64)
                q = lane_u64(p, end, (uint64_t *)at);
            else if (group_fields[j].type != F_I64N)
                return false;
            else if ((q = lane_null(p)) != NULL)
                *(int64_t *)at = SNAP_UNKNOWN_I64;
            else
                q = lane_i64(p, end, (int64_t *)at);
            if (q == NULL)
                return false;
        }
        p = lane_ws(q);
        if (*p == '}')
            break;
        if (*p != ',')
            return false;
        p = lane_ws(p + 1);
    }
    r->c.p = (char *)p + 1;
    return true;
}

static int rd_group(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_groups *g = obj;
    struct snap_group *e = READER_APPEND(r, g->v, g->n, g->cap);
    if (e == NULL)
        return CLI_ENOMEM;
    group_init(e);
    if (fast_group(r, e))
        goto done;
    group_init(e); /* what the fast lane wrote before it gave up */
    int rc = reader_object(r, e, group_fields, NFIELDS(group_fields));
    if (rc != 0)
        return rc;
done:
    if (e->stack_id == SNAP_UNKNOWN_I64)
        e->stack_id = 0;
    g->n++;
    return 0;
}

/* A member of type GROUPS (snapshot.h): live, at_peak, churn, released. */
static int rd_groups(struct reader *r, void *obj)
{
    struct snap_groups *g = obj;
    if (reader_take_null(r))
        return 0;
    g->present = true;
    return reader_array(r, g, rd_group);
}

/* ---- process, config ---- */

static int rd_cmdline_item(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_process *p = obj;
    const char **s = READER_APPEND(r, p->cmdline, p->ncmdline, p->cmdline_cap);
    if (s == NULL)
        return CLI_ENOMEM;
    int rc = reader_str(r, s, false);
    if (rc == 0)
        p->ncmdline++;
    return rc;
}

static const struct field process_fields[] = {SNAP_PROCESS_SCHEMA(SCHEMA_FIELD)};

static const struct field refresh_fields[] = {SNAP_REFRESH_SCHEMA(SCHEMA_FIELD)};

static const struct field limit_fields[] = {SNAP_LIMIT_SCHEMA(SCHEMA_FIELD)};

static int rd_limit(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_config *c = obj;
    struct snap_limit *l = READER_APPEND(r, c->limits, c->nlimits, c->limits_cap);
    if (l == NULL)
        return CLI_ENOMEM;
    int rc = reader_object(r, l, limit_fields, NFIELDS(limit_fields));
    if (rc == 0)
        c->nlimits++;
    return rc;
}

static const struct field config_fields[] = {SNAP_CONFIG_SCHEMA(SCHEMA_FIELD)};

/* ---- devices ---- */

static const struct field kind_fields[] = {SNAP_KIND_STATS_SCHEMA(SCHEMA_FIELD)};

/* The by_kind keys: format.h's kinds counted on a device, each a kind's
 * record at its place in by_kind[]. */
#define BY_KIND_FIELD(sym, key, dev, ctx, placed, phrase)                                  \
    FORMAT_IF_ON_DEVICE(dev, {.name = key, .type = F_OBJECT,                              \
                              .off = KIND_##sym * sizeof(struct snap_kind_stats),          \
                              .sub = kind_fields, .nsub = NFIELDS(kind_fields)},)
static const struct field by_kind_fields[] = {FORMAT_KINDS(BY_KIND_FIELD)};
#undef BY_KIND_FIELD

static int rd_by_kind(struct reader *r, void *obj)
{
    struct snap_device *d = obj;
    d->by_kind_present = true;
    return reader_object(r, d->by_kind, by_kind_fields, NFIELDS(by_kind_fields));
}

static const struct field vmm_fields[] = {SNAP_VMM_SCHEMA(SCHEMA_FIELD)};

static const struct field frag_fields[] = {SNAP_FRAG_SCHEMA(SCHEMA_FIELD)};

static const struct field bucket_fields[] = {SNAP_BUCKET_SCHEMA(SCHEMA_FIELD)};

static int rd_bucket(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_device *d = obj;
    struct snap_bucket *b = READER_APPEND(r, d->hist, d->nhist, d->hist_cap);
    if (b == NULL)
        return CLI_ENOMEM;
    int rc = reader_object(r, b, bucket_fields, NFIELDS(bucket_fields));
    if (rc == 0)
        d->nhist++;
    return rc;
}

static const struct field device_fields[] = {SNAP_DEVICE_SCHEMA(SCHEMA_FIELD)};

static void kind_stats_init(struct snap_kind_stats *k)
{
    memset(k, 0, sizeof *k);
    k->peak_time_ns = SNAP_UNKNOWN_I64;
}

static int rd_device(struct reader *r, void *obj, size_t i)
{
    struct snapshot *s = obj;
    struct snap_device *d = READER_APPEND(r, s->devices, s->ndevices, s->devices_cap);
    if (d == NULL)
        return CLI_ENOMEM;
    s->ndevices++;
    d->ordinal = (int64_t)i;
    d->total_bytes = d->free_bytes = d->limit_bytes = SNAP_UNKNOWN;
    d->peak_time_ns = SNAP_UNKNOWN_I64;
    for (int k = 0; k < DEVICE_KINDS; k++)
        kind_stats_init(&d->by_kind[k]);
    return reader_object(r, d, device_fields, NFIELDS(device_fields));
}

/* ---- host_pinned, counters ---- */

/* the figures of a kind, in snap_host.stats, then the host's own */
#define HOST_STATS_FIELD(st, key, member, type, json) SCHEMA_FIELD_##type(snap_host, key, stats.member)
static const struct field host_fields[] = {
    SNAP_KIND_STATS_SCHEMA(HOST_STATS_FIELD) SNAP_HOST_SCHEMA(SCHEMA_FIELD)};
#undef HOST_STATS_FIELD

static const struct field counter_fields[] = {
    SNAP_COUNTERS_SCHEMA(SCHEMA_FIELD)};

static int rd_counters(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    s->counters.present = true;
    return reader_object(r, &s->counters, counter_fields, NFIELDS(counter_fields));
}

/* ---- oom, ooms ---- */

static int rd_oom_cause(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    const char *k;
    int rc = reader_str(r, &k, true);
    if (rc != 0 || k == NULL)
        return rc;
    o->cause_name = k;
    o->cause = CAUSE_UNKNOWN;
    for (int c = FORMAT_CAUSE_NONE + 1; c < FORMAT_CAUSE_COUNT; c++)
        if (strcmp(k, format_cause_name((enum format_cause)c)) == 0)
            o->cause = (enum oom_cause)c;
    return 0;
}

#define OOM_KIND_FIELD(sym, key, dev, ctx, placed, phrase) \
    FORMAT_IF_ON_DEVICE(dev, {.name = key, .type = F_U64, .off = KIND_##sym * sizeof(uint64_t)},)
static const struct field oom_kind_fields[] = {FORMAT_KINDS(OOM_KIND_FIELD)};
#undef OOM_KIND_FIELD

static int rd_oom_by_kind(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    if (reader_take_null(r))
        return 0;
    return reader_object(r, o->by_kind, oom_kind_fields, NFIELDS(oom_kind_fields));
}

static const struct field oom_fields[] = {SNAP_OOM_SCHEMA(SCHEMA_FIELD)};

static int rd_oom(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    struct snap_oom *o = &s->oom;
    o->total_bytes = o->free_bytes = o->limit_bytes = SNAP_UNKNOWN;
    o->tracked_bytes = o->untracked_bytes = o->shortfall_bytes = SNAP_UNKNOWN;
    o->attempts = o->released_bytes = o->released_count = SNAP_UNKNOWN;
    o->thread = o->time_ns = SNAP_UNKNOWN_I64;
    o->recovered = -1;
    o->stack = SNAP_NO_STACK;
    return reader_optional_object(r, o, &o->present, oom_fields, NFIELDS(oom_fields));
}

static int rd_dump_name(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_ooms *o = obj;
    const char **name = READER_APPEND(r, o->dumps, o->ndumps, o->dumps_cap);
    if (name == NULL)
        return CLI_ENOMEM;
    int rc = reader_str(r, name, false);
    if (rc == 0)
        o->ndumps++;
    return rc;
}

static const struct field attempt_fields[] = {SNAP_ATTEMPT_SCHEMA(SCHEMA_FIELD)};

static int rd_attempt(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_ooms *o = obj;
    struct snap_attempt *a = READER_APPEND(r, o->attempts, o->nattempts, o->attempts_cap);
    if (a == NULL)
        return CLI_ENOMEM;
    int rc = reader_object(r, a, attempt_fields, NFIELDS(attempt_fields));
    if (rc == 0)
        o->nattempts++;
    return rc;
}

static const struct field ooms_fields[] = {SNAP_OOMS_SCHEMA(SCHEMA_FIELD)};

static int rd_ooms(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    if (reader_take_null(r))
        return 0;
    return reader_object(r, &s->ooms, ooms_fields, NFIELDS(ooms_fields));
}

/* ---- top level ---- */

/* format and version are judged after the pass (snapshot_read.c):
 * here they are only noted, whatever their type. */
static int rd_format(struct reader *r, void *obj)
{
    (void)obj;
    if (json_peek(&r->c) == JSON_STRING)
        return reader_raw(r, &r->format) == 0 ? 0 : reader_json_failed(r);
    return json_skip(&r->c) == JSON_OK ? 0 : reader_json_failed(r);
}

static int rd_version(struct reader *r, void *obj)
{
    (void)obj;
    r->have_version = true;
    if (json_get_int64(&r->c, &r->version) == JSON_OK) {
        r->version_int = true;
        return 0;
    }
    return json_skip(&r->c) == JSON_OK ? 0 : reader_json_failed(r);
}

static const struct field top_fields[] = {SNAP_TOP_SCHEMA(SCHEMA_FIELD)};

int snapshot_sections_read(struct reader *r)
{
    return reader_object(r, r->s, top_fields, NFIELDS(top_fields));
}

void snapshot_sections_init(struct snapshot *s, struct snapctx *ctx, const char *name,
                            size_t len)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->file = name;
    s->file_bytes = len;
    s->sequence = SNAP_UNKNOWN_I64;
    s->process.pid = s->process.ppid = s->process.rank = SNAP_UNKNOWN_I64;
    s->process.local_rank = s->process.world_size = SNAP_UNKNOWN_I64;
    s->process.start_wall_ns = s->process.dump_time_ns = SNAP_UNKNOWN_I64;
    s->refresh.answered = s->refresh.direct = -1;
    s->refresh.asked_ns = s->refresh.waited_ns = s->refresh.wait_ms = SNAP_UNKNOWN_I64;
    s->config.depth = s->config.event_cap = SNAP_UNKNOWN;
    s->config.python = s->config.native = -1;
    kind_stats_init(&s->host.stats);
    s->oom.stack = SNAP_NO_STACK;
    s->events.cap = s->events.recorded = SNAP_UNKNOWN;
    s->events.stride = 1;
    s->events.thinned = -1;
}
