/* snapshot_read.c - JSON snapshot (docs/snapshot-format.md) -> struct snapshot.
 *
 * One pass reads the model, streaming: stacks, groups and events go
 * straight into compact structs (a large snapshot is mostly frames; a JSON
 * tree of it would be several times the file).  Each broken file must get
 * the one message that tells its real cause, in this order of precedence:
 * truncated or not JSON (the first such place in the file), JSON but not a
 * cumemtrace snapshot, a newer version, then a field of the wrong type or
 * value ("devices[0].peak_bytes is a string").  The pass meets these in
 * file order, not in that order, so when it stops at a field it has not
 * yet seen the rest: only then (the error path) a second, validating pass
 * over the whole document decides which message wins.
 *
 * Leniency (docs/cli.md): unknown fields are skipped; a missing field reads
 * as null/0/empty; null is accepted where the format says a value may be
 * unknown, and for every time and process field.  Stacks may come after
 * the groups that reference them (the doc lists `stacks` last), so group
 * stack ids are resolved at the end, and an id that no stack has is an
 * error, not a silent "unknown".
 */
#include "snapshot_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frames.h"
#include "json.h"
#include "symbolize.h"

#define PATH_MAX_DEPTH 16 /* deeper than any field path of the format */

struct path_elem {
    const char *key; /* NULL for an array index */
    size_t index;
};

struct reader {
    struct json_cursor c;
    struct snapctx *ctx;
    struct snapshot *s;
    struct cli_error *err;
    const char *name;
    size_t len;
    struct path_elem path[PATH_MAX_DEPTH];
    int depth;
    uint32_t *tmp; /* frames of the stack being read */
    size_t tmp_cap;
    struct arena scratch;    /* lives for one read */
    struct hmap raw_frames;  /* raw frame bytes -> frame index (in scratch) */
    char *key;               /* the raw frame being looked up */
    size_t key_cap;
    const char *format;      /* top-level "format" if a string (in the buffer) */
    int64_t version;         /* top-level "version" ... */
    bool have_version;       /* ... if present */
    bool version_int;        /* ... and an integer */
    bool data_read; /* events.data seen (columns must not change after) */
    int col_of_pos[16]; /* events column at row position j, -1 unknown */
    size_t ncols;
    struct read_module *mods; /* "modules": name -> symbolizer handle */
    size_t nmods, mods_cap;
    uint32_t *expand; /* runs [n, frame...] of inlined chains, see rd_frame */
    size_t nexpand, expand_cap;
};

#define EXPANDED 0x80000000u /* raw_frames value: an index into expand */

/* ---- messages ---- */

static void push_key(struct reader *r, const char *key)
{
    if (r->depth < PATH_MAX_DEPTH)
        r->path[r->depth] = (struct path_elem){key, 0};
    r->depth++;
}

static void push_index(struct reader *r, size_t i)
{
    if (r->depth < PATH_MAX_DEPTH)
        r->path[r->depth] = (struct path_elem){NULL, i};
    r->depth++;
}

static void pop(struct reader *r)
{
    r->depth--;
}

static const char *path_text(const struct reader *r, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    int d = r->depth < PATH_MAX_DEPTH ? r->depth : PATH_MAX_DEPTH;
    for (int i = 0; i < d && used < n; i++) {
        const struct path_elem *e = &r->path[i];
        int w;
        if (e->key != NULL)
            w = snprintf(buf + used, n - used, "%s%s", i ? "." : "", e->key);
        else
            w = snprintf(buf + used, n - used, "[%zu]", e->index);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (buf[0] == '\0')
        snprintf(buf, n, "the top level");
    return buf;
}

/* Maps a sticky cursor error to the CLI error. */
static int json_failed(struct reader *r)
{
    struct json_cursor *c = &r->c;
    unsigned long line, col;
    switch (c->status) {
    case JSON_ETRUNC:
        return errors_set(r->err, CLI_ETRUNC,
                          "cannot read snapshot '%s': truncated after %zu bytes",
                          r->name, r->len);
    case JSON_ENOMEM:
        return errors_set(r->err, CLI_ENOMEM,
                          "cannot read snapshot '%s': out of memory", r->name);
    default:
        json_line_col(c->buf, c->err_offset, &line, &col);
        return errors_set(r->err, CLI_ENOTJSON,
                          "cannot read snapshot '%s': not JSON: %s at line %lu, column %lu",
                          r->name, c->err_msg, line, col);
    }
}

static int nomem(struct reader *r)
{
    return errors_set(r->err, CLI_ENOMEM, "cannot read snapshot '%s': out of memory",
                      r->name);
}

static const char *type_text(enum json_type t)
{
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    default: return "invalid";
    }
}

/* The value at the cursor is not what `expected` says: name it. */
static int bad_value(struct reader *r, int rc, const char *expected)
{
    if (rc != JSON_ETYPE && rc != JSON_ERANGE)
        return json_failed(r);
    char path[256];
    path_text(r, path, sizeof path);
    enum json_type t = json_peek(&r->c);
    if (t == JSON_INVALID)
        return json_failed(r);
    unsigned long line, col;
    json_line_col(r->c.buf, json_offset(&r->c), &line, &col);
    if (rc == JSON_ERANGE) {
        char num[32];
        size_t i = 0;
        const char *p = r->c.p;
        while (i < sizeof num - 1 && (strchr("+-.eE", p[i]) || (p[i] >= '0' && p[i] <= '9')) && p[i])
            num[i] = p[i], i++;
        num[i] = '\0';
        return errors_set(r->err, CLI_EVALUE,
                          "cannot read snapshot '%s': %s is %s, expected %s at line %lu, column %lu",
                          r->name, path, num, expected, line, col);
    }
    return errors_set(r->err, CLI_ETYPE,
                      "cannot read snapshot '%s': %s is %s, expected %s at line %lu, column %lu",
                      r->name, path, type_text(t), expected, line, col);
}

static int invalid(struct reader *r, const char *what)
{
    char path[256];
    path_text(r, path, sizeof path);
    return errors_set(r->err, CLI_EVALUE, "cannot read snapshot '%s': %s %s",
                      r->name, path, what);
}

/* ---- scalars ---- */

static bool take_null(struct reader *r)
{
    if (json_peek(&r->c) != JSON_NULL)
        return false;
    return json_get_null(&r->c) == JSON_OK;
}

static int rd_u64(struct reader *r, uint64_t *out, bool nullable)
{
    int rc = json_get_uint64(&r->c, out);
    if (rc == JSON_OK)
        return 0;
    if (nullable && rc == JSON_ETYPE && take_null(r)) {
        *out = SNAP_UNKNOWN;
        return 0;
    }
    return bad_value(r, rc, nullable ? "a non-negative integer or null"
                                     : "a non-negative integer");
}

static int rd_i64(struct reader *r, int64_t *out, bool nullable)
{
    int rc = json_get_int64(&r->c, out);
    if (rc == JSON_OK)
        return 0;
    if (nullable && rc == JSON_ETYPE && take_null(r)) {
        *out = SNAP_UNKNOWN_I64;
        return 0;
    }
    return bad_value(r, rc, nullable ? "an integer or null" : "an integer");
}

static int rd_bool(struct reader *r, int *out, bool nullable)
{
    bool b;
    int rc = json_get_bool(&r->c, &b);
    if (rc == JSON_OK) {
        *out = b;
        return 0;
    }
    if (nullable && rc == JSON_ETYPE && take_null(r)) {
        *out = -1;
        return 0;
    }
    return bad_value(r, rc, nullable ? "a boolean or null" : "a boolean");
}

/* Reads a string and interns it (NULL for null when nullable). */
static int rd_str(struct reader *r, const char **out, bool nullable)
{
    const char *s;
    size_t n;
    int rc = json_get_string(&r->c, &s, &n);
    if (rc == JSON_OK) {
        *out = snapshot_intern(r->ctx, s, n);
        return *out ? 0 : nomem(r);
    }
    if (nullable && rc == JSON_ETYPE && take_null(r)) {
        *out = NULL;
        return 0;
    }
    return bad_value(r, rc, nullable ? "a string or null" : "a string");
}

/* A string or null without interning: the pointer into the buffer. */
static int rd_raw(struct reader *r, const char **out)
{
    int rc = json_get_string(&r->c, out, NULL);
    if (rc == JSON_OK)
        return 0;
    if (rc == JSON_ETYPE && take_null(r)) {
        *out = NULL;
        return 0;
    }
    return bad_value(r, rc, "a string or null");
}

/* ---- objects, table-driven ---- */

enum ftype {
    F_U64, F_U64N, F_I64, F_I64N, F_BOOLN, F_STR, F_STRN,
    F_RAWN, /* a string or null, left in the buffer (valid during the read) */
    F_FN
};

struct field {
    const char *name;
    enum ftype type;
    size_t off;
    int (*fn)(struct reader *r, void *obj);
};

#define FIELD(st, name, type) {#name, type, offsetof(struct st, name), NULL}
#define FIELD_AT(key, st, member, type) {key, type, offsetof(struct st, member), NULL}
#define FIELD_FN(key, fn) {key, F_FN, 0, fn}
#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

static int rd_field(struct reader *r, void *obj, const struct field *f)
{
    char *p = (char *)obj + f->off;
    switch (f->type) {
    case F_U64: return rd_u64(r, (uint64_t *)(void *)p, false);
    case F_U64N: return rd_u64(r, (uint64_t *)(void *)p, true);
    case F_I64: return rd_i64(r, (int64_t *)(void *)p, false);
    case F_I64N: return rd_i64(r, (int64_t *)(void *)p, true);
    case F_BOOLN: return rd_bool(r, (int *)(void *)p, true);
    case F_STR: return rd_str(r, (const char **)(void *)p, false);
    case F_STRN: return rd_str(r, (const char **)(void *)p, true);
    case F_RAWN: return rd_raw(r, (const char **)(void *)p);
    default: return f->fn(r, obj);
    }
}

/* Reads an object, dispatching known keys through the table and skipping
 * the others. */
static int rd_object(struct reader *r, void *obj, const struct field *fields,
                     size_t nfields)
{
    int rc = json_enter_object(&r->c);
    if (rc != JSON_OK)
        return bad_value(r, rc, "an object");
    const char *key;
    size_t keylen;
    while ((rc = json_next_member(&r->c, &key, &keylen)) == 1) {
        const struct field *f = NULL;
        for (size_t i = 0; i < nfields; i++) {
            if (strcmp(fields[i].name, key) == 0) {
                f = &fields[i];
                break;
            }
        }
        if (f == NULL) {
            if (json_skip(&r->c) != JSON_OK)
                return json_failed(r);
            continue;
        }
        push_key(r, f->name);
        rc = rd_field(r, obj, f);
        pop(r);
        if (rc != 0)
            return rc;
    }
    return rc < 0 ? json_failed(r) : 0;
}

/* Iterates an array, calling fn for each element with its index. */
static int rd_array(struct reader *r, void *obj,
                    int (*fn)(struct reader *r, void *obj, size_t i))
{
    int rc = json_enter_array(&r->c);
    if (rc != JSON_OK)
        return bad_value(r, rc, "an array");
    size_t i = 0;
    while ((rc = json_next_element(&r->c)) == 1) {
        push_index(r, i);
        rc = fn(r, obj, i);
        pop(r);
        if (rc != 0)
            return rc;
        i++;
    }
    return rc < 0 ? json_failed(r) : 0;
}

/* An object or null: null leaves *present false. */
static int rd_optional_object(struct reader *r, void *obj, bool *present,
                              const struct field *fields, size_t nfields)
{
    if (take_null(r)) {
        *present = false;
        return 0;
    }
    *present = true;
    return rd_object(r, obj, fields, nfields);
}

/* ---- groups ---- */

static const struct field group_fields[] = {
    FIELD_AT("stack", snap_group, stack_id, F_I64N),
    FIELD_AT("bytes", snap_group, bytes, F_U64),
    FIELD_AT("count", snap_group, count, F_U64),
};

static int rd_group(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_groups *g = obj;
    if (snapshot_vec_reserve((void **)&g->v, &g->cap, sizeof *g->v, g->n + 1))
        return nomem(r);
    struct snap_group *e = &g->v[g->n];
    memset(e, 0, sizeof *e);
    e->stack = SNAP_NO_STACK;
    e->kind = KIND_DEVICE;
    /* kind is a string: read it by hand around the table. */
    int rc = json_enter_object(&r->c);
    if (rc != JSON_OK)
        return bad_value(r, rc, "an object");
    const char *key;
    while ((rc = json_next_member(&r->c, &key, NULL)) == 1) {
        if (strcmp(key, "kind") == 0) {
            const char *k;
            push_key(r, "kind");
            rc = rd_str(r, &k, true);
            pop(r);
            if (rc != 0)
                return rc;
            if (k != NULL)
                e->kind = (uint8_t)snapshot_kind_parse(k);
            continue;
        }
        const struct field *f = NULL;
        for (size_t j = 0; j < NFIELDS(group_fields); j++)
            if (strcmp(group_fields[j].name, key) == 0)
                f = &group_fields[j];
        if (f == NULL) {
            if (json_skip(&r->c) != JSON_OK)
                return json_failed(r);
            continue;
        }
        push_key(r, f->name);
        rc = rd_field(r, e, f);
        pop(r);
        if (rc != 0)
            return rc;
    }
    if (rc < 0)
        return json_failed(r);
    if (e->stack_id == SNAP_UNKNOWN_I64)
        e->stack_id = 0;
    g->n++;
    return 0;
}

static int rd_groups(struct reader *r, struct snap_groups *g)
{
    if (take_null(r))
        return 0;
    return rd_array(r, g, rd_group);
}

/* ---- process, config ---- */

static int rd_cmdline_item(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_process *p = obj;
    if (snapshot_vec_reserve((void **)&p->cmdline, &p->cmdline_cap,
                             sizeof *p->cmdline, p->ncmdline + 1))
        return nomem(r);
    const char *s;
    int rc = rd_str(r, &s, false);
    if (rc == 0)
        p->cmdline[p->ncmdline++] = s;
    return rc;
}

static int rd_cmdline(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_cmdline_item);
}

static const struct field process_fields[] = {
    FIELD(snap_process, pid, F_I64N),
    FIELD(snap_process, ppid, F_I64N),
    FIELD(snap_process, exe, F_STRN),
    FIELD_FN("cmdline", rd_cmdline),
    FIELD(snap_process, host, F_STRN),
    FIELD(snap_process, rank, F_I64N),
    FIELD(snap_process, start_wall_ns, F_I64N),
    FIELD(snap_process, dump_time_ns, F_I64N),
    FIELD(snap_process, tool_version, F_STRN),
};

static int rd_process(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    return rd_object(r, &s->process, process_fields, NFIELDS(process_fields));
}

static const struct field limit_fields[] = {
    FIELD(snap_limit, device, F_I64),
    FIELD(snap_limit, bytes, F_U64),
};

static int rd_limit(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_config *c = obj;
    if (snapshot_vec_reserve((void **)&c->limits, &c->limits_cap, sizeof *c->limits,
                             c->nlimits + 1))
        return nomem(r);
    struct snap_limit *l = &c->limits[c->nlimits];
    memset(l, 0, sizeof *l);
    int rc = rd_object(r, l, limit_fields, NFIELDS(limit_fields));
    if (rc == 0)
        c->nlimits++;
    return rc;
}

static int rd_limits(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_limit);
}

static const struct field config_fields[] = {
    FIELD(snap_config, depth, F_U64N),
    FIELD(snap_config, event_cap, F_U64N),
    FIELD_FN("limit_bytes", rd_limits),
    FIELD(snap_config, python, F_BOOLN),
    FIELD(snap_config, native, F_BOOLN),
};

static int rd_config(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    return rd_object(r, &s->config, config_fields, NFIELDS(config_fields));
}

/* ---- devices ---- */

static const struct field kind_fields[] = {
    FIELD(snap_kind_stats, current_bytes, F_U64),
    FIELD(snap_kind_stats, peak_bytes, F_U64),
    FIELD(snap_kind_stats, peak_time_ns, F_I64N),
    FIELD(snap_kind_stats, allocs, F_U64),
    FIELD(snap_kind_stats, frees, F_U64),
    FIELD(snap_kind_stats, failures, F_U64),
};

static int rd_kind_device(struct reader *r, void *obj)
{
    struct snap_kind_stats *k = obj;
    return rd_object(r, &k[KIND_DEVICE], kind_fields, NFIELDS(kind_fields));
}
static int rd_kind_managed(struct reader *r, void *obj)
{
    struct snap_kind_stats *k = obj;
    return rd_object(r, &k[KIND_MANAGED], kind_fields, NFIELDS(kind_fields));
}
static int rd_kind_async(struct reader *r, void *obj)
{
    struct snap_kind_stats *k = obj;
    return rd_object(r, &k[KIND_ASYNC], kind_fields, NFIELDS(kind_fields));
}
static int rd_kind_vmm(struct reader *r, void *obj)
{
    struct snap_kind_stats *k = obj;
    return rd_object(r, &k[KIND_VMM], kind_fields, NFIELDS(kind_fields));
}

static const struct field by_kind_fields[] = {
    FIELD_FN("device", rd_kind_device),
    FIELD_FN("managed", rd_kind_managed),
    FIELD_FN("async", rd_kind_async),
    FIELD_FN("vmm", rd_kind_vmm),
};

static int rd_by_kind(struct reader *r, void *obj)
{
    struct snap_device *d = obj;
    return rd_object(r, d->by_kind, by_kind_fields, NFIELDS(by_kind_fields));
}

static const struct field vmm_fields[] = {
    FIELD(snap_vmm, reserved_bytes, F_U64),
    FIELD(snap_vmm, mapped_bytes, F_U64),
    FIELD(snap_vmm, physical_bytes, F_U64),
    FIELD(snap_vmm, reserved_peak_bytes, F_U64),
    FIELD(snap_vmm, mapped_peak_bytes, F_U64),
};

static int rd_vmm(struct reader *r, void *obj)
{
    struct snap_device *d = obj;
    return rd_optional_object(r, &d->vmm, &d->vmm.present, vmm_fields,
                              NFIELDS(vmm_fields));
}

static const struct field frag_fields[] = {
    FIELD(snap_frag, granularity_bytes, F_U64N),
    FIELD(snap_frag, requested_bytes, F_U64),
    FIELD(snap_frag, rounded_bytes, F_U64),
    FIELD(snap_frag, small_count, F_U64),
    FIELD(snap_frag, small_bytes, F_U64),
};

static int rd_frag(struct reader *r, void *obj)
{
    struct snap_device *d = obj;
    return rd_optional_object(r, &d->frag, &d->frag.present, frag_fields,
                              NFIELDS(frag_fields));
}

static int rd_live(struct reader *r, void *obj)
{
    struct snap_device *d = obj;
    return rd_groups(r, &d->live);
}

static int rd_at_peak(struct reader *r, void *obj)
{
    struct snap_device *d = obj;
    return rd_groups(r, &d->at_peak);
}

static const struct field bucket_fields[] = {
    FIELD(snap_bucket, le, F_U64),
    FIELD(snap_bucket, count, F_U64),
    FIELD(snap_bucket, bytes, F_U64),
};

static int rd_bucket(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_device *d = obj;
    if (snapshot_vec_reserve((void **)&d->hist, &d->hist_cap, sizeof *d->hist,
                             d->nhist + 1))
        return nomem(r);
    struct snap_bucket *b = &d->hist[d->nhist];
    memset(b, 0, sizeof *b);
    int rc = rd_object(r, b, bucket_fields, NFIELDS(bucket_fields));
    if (rc == 0)
        d->nhist++;
    return rc;
}

static int rd_histogram(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_bucket);
}

static const struct field device_fields[] = {
    FIELD(snap_device, ordinal, F_I64),
    FIELD(snap_device, total_bytes, F_U64N),
    FIELD(snap_device, free_bytes, F_U64N),
    FIELD(snap_device, limit_bytes, F_U64N),
    FIELD(snap_device, current_bytes, F_U64),
    FIELD(snap_device, peak_bytes, F_U64),
    FIELD(snap_device, peak_time_ns, F_I64N),
    FIELD_FN("by_kind", rd_by_kind),
    FIELD_FN("vmm", rd_vmm),
    FIELD_FN("live", rd_live),
    FIELD_FN("at_peak", rd_at_peak),
    FIELD_FN("histogram", rd_histogram),
    FIELD_FN("fragmentation", rd_frag),
};

static void kind_stats_init(struct snap_kind_stats *k)
{
    memset(k, 0, sizeof *k);
    k->peak_time_ns = SNAP_UNKNOWN_I64;
}

static int rd_device(struct reader *r, void *obj, size_t i)
{
    struct snapshot *s = obj;
    if (snapshot_vec_reserve((void **)&s->devices, &s->devices_cap,
                             sizeof *s->devices, s->ndevices + 1))
        return nomem(r);
    struct snap_device *d = &s->devices[s->ndevices++];
    memset(d, 0, sizeof *d);
    d->ordinal = (int64_t)i;
    d->total_bytes = d->free_bytes = d->limit_bytes = SNAP_UNKNOWN;
    d->peak_time_ns = SNAP_UNKNOWN_I64;
    for (int k = 0; k < DEVICE_KINDS; k++)
        kind_stats_init(&d->by_kind[k]);
    return rd_object(r, d, device_fields, NFIELDS(device_fields));
}

static int rd_devices(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_device);
}

/* ---- host_pinned, counters ---- */

static int rd_host_live(struct reader *r, void *obj)
{
    struct snap_host *h = obj;
    return rd_groups(r, &h->live);
}

static int rd_host_at_peak(struct reader *r, void *obj)
{
    struct snap_host *h = obj;
    return rd_groups(r, &h->at_peak);
}

static const struct field host_fields[] = {
    FIELD_AT("current_bytes", snap_host, stats.current_bytes, F_U64),
    FIELD_AT("peak_bytes", snap_host, stats.peak_bytes, F_U64),
    FIELD_AT("peak_time_ns", snap_host, stats.peak_time_ns, F_I64N),
    FIELD_AT("allocs", snap_host, stats.allocs, F_U64),
    FIELD_AT("frees", snap_host, stats.frees, F_U64),
    FIELD_AT("failures", snap_host, stats.failures, F_U64),
    FIELD_FN("live", rd_host_live),
    FIELD_FN("at_peak", rd_host_at_peak),
};

static int rd_host(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    return rd_optional_object(r, &s->host, &s->host.present, host_fields,
                              NFIELDS(host_fields));
}

static const struct field counter_fields[] = {
    FIELD(snap_counters, unknown_frees, F_U64),
    FIELD(snap_counters, wrong_kind_frees, F_U64),
    FIELD(snap_counters, unknown_free_calls, F_U64),
    FIELD(snap_counters, failed_frees, F_U64),
    FIELD(snap_counters, stacks, F_U64),
    FIELD(snap_counters, live_allocations, F_U64),
    FIELD(snap_counters, oom_dumps_suppressed, F_U64),
};

static int rd_counters(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    return rd_object(r, &s->counters, counter_fields, NFIELDS(counter_fields));
}

/* ---- oom, ooms ---- */

static int rd_oom_kind(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    const char *k;
    int rc = rd_str(r, &k, true);
    if (rc == 0 && k != NULL)
        o->kind = (uint8_t)snapshot_kind_parse(k);
    return rc;
}

static int rd_oom_cause(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    const char *k;
    int rc = rd_str(r, &k, true);
    if (rc != 0 || k == NULL)
        return rc;
    o->cause_name = k;
    if (strcmp(k, "exhausted") == 0)
        o->cause = CAUSE_EXHAUSTED;
    else if (strcmp(k, "fragmentation") == 0)
        o->cause = CAUSE_FRAGMENTATION;
    else if (strcmp(k, "limit") == 0)
        o->cause = CAUSE_LIMIT;
    return 0;
}

static const struct field oom_kind_fields[] = {
    {"device", F_U64, KIND_DEVICE * sizeof(uint64_t), NULL},
    {"managed", F_U64, KIND_MANAGED * sizeof(uint64_t), NULL},
    {"async", F_U64, KIND_ASYNC * sizeof(uint64_t), NULL},
    {"vmm", F_U64, KIND_VMM * sizeof(uint64_t), NULL},
};

static int rd_oom_by_kind(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    if (take_null(r))
        return 0;
    return rd_object(r, o->by_kind, oom_kind_fields, NFIELDS(oom_kind_fields));
}

static int rd_oom_live(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    return rd_groups(r, &o->live);
}

static int rd_oom_released(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    return rd_groups(r, &o->released);
}

static int rd_oom_recovered(struct reader *r, void *obj)
{
    struct snap_oom *o = obj;
    return rd_bool(r, &o->recovered, true);
}

static const struct field oom_fields[] = {
    FIELD(snap_oom, requested_bytes, F_U64),
    FIELD(snap_oom, device, F_I64),
    FIELD_FN("kind", rd_oom_kind),
    FIELD(snap_oom, entry_point, F_STRN),
    FIELD(snap_oom, thread, F_I64N),
    FIELD(snap_oom, time_ns, F_I64N),
    FIELD_AT("stack", snap_oom, stack_id, F_I64N),
    FIELD(snap_oom, total_bytes, F_U64N),
    FIELD(snap_oom, free_bytes, F_U64N),
    FIELD(snap_oom, limit_bytes, F_U64N),
    FIELD(snap_oom, tracked_bytes, F_U64N),
    FIELD(snap_oom, untracked_bytes, F_U64N),
    FIELD_FN("by_kind", rd_oom_by_kind),
    FIELD_FN("cause", rd_oom_cause),
    FIELD(snap_oom, shortfall_bytes, F_U64N),
    FIELD(snap_oom, attempts, F_U64N),
    FIELD_FN("recovered", rd_oom_recovered),
    FIELD(snap_oom, released_bytes, F_U64N),
    FIELD(snap_oom, released_count, F_U64N),
    FIELD_FN("live", rd_oom_live),
    FIELD_FN("released", rd_oom_released),
};

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
    return rd_optional_object(r, o, &o->present, oom_fields, NFIELDS(oom_fields));
}

static int rd_dump_name(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_ooms *o = obj;
    if (snapshot_vec_reserve((void **)&o->dumps, &o->dumps_cap, sizeof *o->dumps,
                             o->ndumps + 1))
        return nomem(r);
    const char *name;
    int rc = rd_str(r, &name, false);
    if (rc == 0)
        o->dumps[o->ndumps++] = name;
    return rc;
}

static int rd_dumps(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_dump_name);
}

static const struct field attempt_fields[] = {
    FIELD(snap_attempt, t_ns, F_I64),
    FIELD(snap_attempt, device, F_I64),
    FIELD(snap_attempt, requested_bytes, F_U64),
    FIELD(snap_attempt, chain, F_U64),
    FIELD(snap_attempt, attempt, F_U64),
    FIELD(snap_attempt, outcome, F_STR),
};

static int rd_attempt(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_ooms *o = obj;
    if (snapshot_vec_reserve((void **)&o->attempts, &o->attempts_cap,
                             sizeof *o->attempts, o->nattempts + 1))
        return nomem(r);
    struct snap_attempt *a = &o->attempts[o->nattempts];
    memset(a, 0, sizeof *a);
    int rc = rd_object(r, a, attempt_fields, NFIELDS(attempt_fields));
    if (rc == 0)
        o->nattempts++;
    return rc;
}

static int rd_attempts(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_attempt);
}

static const struct field ooms_fields[] = {
    FIELD(snap_ooms, count, F_U64),
    FIELD(snap_ooms, failed_attempts, F_U64),
    FIELD(snap_ooms, recovered, F_U64),
    FIELD(snap_ooms, retry_released_bytes, F_U64),
    FIELD(snap_ooms, suppressed, F_U64),
    FIELD_FN("dumps", rd_dumps),
    FIELD_FN("attempts", rd_attempts),
};

static int rd_ooms(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    if (take_null(r))
        return 0;
    return rd_object(r, &s->ooms, ooms_fields, NFIELDS(ooms_fields));
}

/* ---- events ---- */

/* The documented columns, in the documented order. */
enum { COL_T, COL_DEVICE, COL_KIND, COL_DELTA, COL_STACK, COL_CURRENT, NCOLS };
static const char *const col_names[NCOLS] = {
    "t_ns", "device", "kind", "delta", "stack", "current",
};

static void default_columns(struct reader *r)
{
    for (int j = 0; j < NCOLS; j++)
        r->col_of_pos[j] = j;
    r->ncols = NCOLS;
}

static int rd_column(struct reader *r, void *obj, size_t i)
{
    int *seen = obj;
    const char *name;
    int rc = rd_str(r, &name, false);
    if (rc != 0)
        return rc;
    if (i >= sizeof r->col_of_pos / sizeof r->col_of_pos[0])
        return invalid(r, "is one column too many (at most 16 are supported)");
    int col = -1;
    for (int j = 0; j < NCOLS; j++)
        if (strcmp(name, col_names[j]) == 0)
            col = j;
    if (col >= 0)
        seen[col]++;
    if (r->data_read && (i >= NCOLS || col != (int)i))
        return invalid(r, "comes after events.data and differs from the "
                          "documented column order");
    r->col_of_pos[i] = col;
    r->ncols = i + 1;
    return 0;
}

static int rd_columns(struct reader *r, void *obj)
{
    (void)obj;
    if (take_null(r))
        return 0;
    int seen[NCOLS] = {0};
    r->ncols = 0;
    int rc = rd_array(r, seen, rd_column);
    if (rc != 0)
        return rc;
    for (int j = 0; j < NCOLS; j++) {
        if (seen[j] != 1) {
            char what[96];
            snprintf(what, sizeof what, "must name column \"%s\" exactly once",
                     col_names[j]);
            return invalid(r, what);
        }
    }
    return 0;
}

static int rd_event_value(struct reader *r, struct snap_event *e, int col)
{
    int64_t v;
    int rc;
    switch (col) {
    case COL_T:
        return rd_i64(r, &e->t_ns, false);
    case COL_DEVICE:
        rc = rd_i64(r, &v, false);
        if (rc == 0 && (v < -1 || v > INT32_MAX))
            return invalid(r, "is not a device ordinal (-1 or more)");
        e->device = (int32_t)v;
        return rc;
    case COL_KIND: {
        const char *k;
        rc = rd_str(r, &k, false);
        if (rc == 0)
            e->kind = (uint8_t)snapshot_kind_parse(k);
        return rc;
    }
    case COL_DELTA:
        return rd_i64(r, &e->delta, false);
    case COL_STACK:
        rc = rd_i64(r, &e->stack_id, true);
        if (e->stack_id == SNAP_UNKNOWN_I64)
            e->stack_id = 0;
        return rc;
    case COL_CURRENT:
        return rd_u64(r, &e->current, false);
    default:
        return json_skip(&r->c) == JSON_OK ? 0 : json_failed(r);
    }
}

static int rd_event(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snap_events *ev = obj;
    if (snapshot_vec_reserve((void **)&ev->v, &ev->alloc, sizeof *ev->v, ev->n + 1))
        return nomem(r);
    struct snap_event *e = &ev->v[ev->n];
    memset(e, 0, sizeof *e);
    int rc = json_enter_array(&r->c);
    if (rc != JSON_OK)
        return bad_value(r, rc, "an array (one event row)");
    size_t j = 0;
    while ((rc = json_next_element(&r->c)) == 1) {
        int col = j < r->ncols ? r->col_of_pos[j] : -1;
        push_index(r, j);
        rc = rd_event_value(r, e, col);
        pop(r);
        if (rc != 0)
            return rc;
        j++;
    }
    if (rc < 0)
        return json_failed(r);
    if (j < r->ncols) {
        char what[64];
        snprintf(what, sizeof what, "has %zu values, expected %zu", j, r->ncols);
        return invalid(r, what);
    }
    ev->n++;
    return 0;
}

static int rd_data(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    r->data_read = true;
    if (take_null(r))
        return 0;
    return rd_array(r, &s->events, rd_event);
}

static const struct field events_fields[] = {
    FIELD_AT("cap", snapshot, events.cap, F_U64N),
    FIELD_AT("recorded", snapshot, events.recorded, F_U64N),
    FIELD_AT("stride", snapshot, events.stride, F_U64N),
    FIELD_AT("thinned", snapshot, events.thinned, F_BOOLN),
    FIELD_FN("columns", rd_columns),
    FIELD_FN("data", rd_data),
};

static int rd_events(struct reader *r, void *obj)
{
    struct snapshot *s = obj;
    if (take_null(r))
        return 0;
    return rd_object(r, s, events_fields, NFIELDS(events_fields));
}

/* ---- stacks ---- */

/* ---- modules (before stacks in the file: frames resolve as they are read) ---- */

struct read_module {
    const char *name; /* in the buffer */
    int handle;       /* symbolizer handle, -1: no debug information */
};

struct raw_module {
    const char *name, *path, *build_id;
    uint64_t vaddr_base;
};

static const struct field module_fields[] = {
    FIELD(raw_module, name, F_RAWN),
    FIELD(raw_module, path, F_RAWN),
    FIELD(raw_module, build_id, F_RAWN),
    FIELD(raw_module, vaddr_base, F_U64N),
};

static int rd_module(struct reader *r, void *obj, size_t i)
{
    (void)obj;
    (void)i;
    struct raw_module m = {NULL, NULL, NULL, 0};
    int rc = rd_object(r, &m, module_fields, NFIELDS(module_fields));
    if (rc != 0)
        return rc;
    if (m.name == NULL)
        return invalid(r, "has no \"name\"");
    if (m.vaddr_base == SNAP_UNKNOWN)
        m.vaddr_base = 0;
    if (snapshot_vec_reserve((void **)&r->mods, &r->mods_cap, sizeof *r->mods, r->nmods + 1))
        return nomem(r);
    r->mods[r->nmods].name = m.name;
    r->mods[r->nmods].handle =
        symbolizer_module(r->ctx->sym, m.name, m.path, m.build_id, m.vaddr_base);
    r->nmods++;
    return 0;
}

static int rd_modules(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_module);
}

static int module_handle(const struct reader *r, const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < r->nmods; i++)
        if (strcmp(r->mods[i].name, name) == 0)
            return r->mods[i].handle;
    return -1;
}

/* Names a native frame from debug information: one frame per inlined call
 * level.  Returns how many frame indices went to out (0: keep the record's
 * own naming), or -1 when out of memory. */
static int source_frames(struct reader *r, const char *module, uint64_t offset,
                         uint32_t *out, size_t max)
{
    int h = module_handle(r, module);
    if (h < 0 || offset == SNAP_UNKNOWN)
        return 0;
    struct src_frame sf[SYMBOLIZE_MAX_INLINE];
    size_t n = symbolizer_lookup(r->ctx->sym, h, offset, sf,
                                 max < SYMBOLIZE_MAX_INLINE ? max : SYMBOLIZE_MAX_INLINE);
    for (size_t k = 0; k < n; k++) {
        out[k] = frames_source(r->ctx, module, sf[k].function, sf[k].file, sf[k].line,
                               sf[k].inlined);
        if (out[k] == FRAMES_NONE)
            return -1;
    }
    return (int)n;
}

struct raw_frame {
    const char *module, *symbol, *file, *function, *marker;
    uint64_t offset;
    int64_t line;
};

static const struct field frame_fields[] = {
    FIELD(raw_frame, module, F_RAWN),
    FIELD(raw_frame, offset, F_U64N),
    FIELD(raw_frame, symbol, F_RAWN),
    FIELD(raw_frame, file, F_RAWN),
    FIELD(raw_frame, line, F_I64N),
    FIELD(raw_frame, function, F_RAWN),
    FIELD(raw_frame, marker, F_RAWN),
};

static int rd_frame(struct reader *r, void *obj, size_t i)
{
    size_t *n = obj;
    struct raw_frame f = {NULL, NULL, NULL, NULL, NULL, SNAP_UNKNOWN, SNAP_UNKNOWN_I64};
    int rc = rd_object(r, &f, frame_fields, NFIELDS(frame_fields));
    if (rc != 0)
        return rc;
    /* Most frames repeat (every stack shares its library frames): look the
     * raw bytes up first, and name a frame only the first time. */
    size_t klen = 0;
    const char *parts[5] = {f.module, f.symbol, f.file, f.function, f.marker};
    size_t need = 2 * sizeof(uint64_t); /* offset, line */
    for (int k = 0; k < 5; k++)
        need += 2 + (parts[k] ? strlen(parts[k]) : 0); /* flag, bytes, NUL */
    if (snapshot_vec_reserve((void **)&r->key, &r->key_cap, 1, need))
        return nomem(r);
    for (int k = 0; k < 5; k++) {
        size_t len = parts[k] ? strlen(parts[k]) : 0;
        r->key[klen++] = parts[k] ? 1 : 0; /* null and "" differ */
        if (len > 0)
            memcpy(r->key + klen, parts[k], len);
        klen += len;
        r->key[klen++] = '\0';
    }
    /* The offset is part of the key even with a symbol: debug information
     * names each line of a function apart. */
    uint64_t off = f.offset;
    memcpy(r->key + klen, &off, sizeof off);
    klen += sizeof off;
    memcpy(r->key + klen, &f.line, sizeof f.line);
    klen += sizeof f.line;
    uint32_t idx;
    if (hmap_find(&r->raw_frames, r->key, klen, &idx))
        goto found;
    if (f.marker != NULL)
        idx = frames_marker(r->ctx, f.marker);
    else if (f.file != NULL || f.function != NULL)
        idx = frames_python(r->ctx, f.file, f.line == SNAP_UNKNOWN_I64 ? -1 : f.line,
                            f.function);
    else {
        uint32_t src[SYMBOLIZE_MAX_INLINE];
        int k = source_frames(r, f.module, f.offset, src, SYMBOLIZE_MAX_INLINE);
        if (k < 0)
            return nomem(r);
        if (k == 1) {
            idx = src[0];
        } else if (k > 1) {
            /* An inlined call chain: the key maps to a run in r->expand. */
            if (snapshot_vec_reserve((void **)&r->expand, &r->expand_cap, sizeof *r->expand,
                                     r->nexpand + (size_t)k + 1))
                return nomem(r);
            idx = EXPANDED | (uint32_t)r->nexpand;
            r->expand[r->nexpand++] = (uint32_t)k;
            memcpy(r->expand + r->nexpand, src, (size_t)k * sizeof *src);
            r->nexpand += (size_t)k;
        } else {
            idx = frames_native(r->ctx, f.module, f.offset == SNAP_UNKNOWN ? 0 : f.offset,
                                f.symbol);
        }
    }
    if (idx == FRAMES_NONE)
        return nomem(r);
    uint32_t got;
    if (hmap_get_or_add(&r->raw_frames, r->key, klen, idx, &got, NULL))
        return nomem(r);
found:
    (void)i; /* an inlined chain makes one recorded frame several */
    const uint32_t *run = &idx;
    size_t len = 1;
    if (idx != FRAMES_NONE && (idx & EXPANDED)) {
        run = r->expand + (idx & ~EXPANDED) + 1;
        len = r->expand[idx & ~EXPANDED];
    }
    if (snapshot_vec_reserve((void **)&r->tmp, &r->tmp_cap, sizeof *r->tmp, *n + len))
        return nomem(r);
    memcpy(r->tmp + *n, run, len * sizeof *run);
    *n += len;
    return 0;
}

static int rd_frames(struct reader *r, void *obj)
{
    struct snap_stack *st = obj;
    size_t n = 0;
    if (!take_null(r)) {
        int rc = rd_array(r, &n, rd_frame);
        if (rc != 0)
            return rc;
    }
    if (n > UINT32_MAX)
        return invalid(r, "has too many frames");
    st->nframes = (uint32_t)n;
    st->frames = arena_alloc(&r->ctx->arena, (n ? n : 1) * sizeof *st->frames);
    if (st->frames == NULL)
        return nomem(r);
    if (n > 0)
        memcpy(st->frames, r->tmp, n * sizeof *st->frames);
    return 0;
}

static const struct field stack_fields[] = {
    FIELD(snap_stack, id, F_I64),
    FIELD(snap_stack, entry, F_STRN),
    FIELD_FN("frames", rd_frames),
};

static int rd_stack(struct reader *r, void *obj, size_t i)
{
    (void)i;
    struct snapshot *s = obj;
    if (snapshot_vec_reserve((void **)&s->stacks, &s->stacks_cap, sizeof *s->stacks,
                             s->nstacks + 1))
        return nomem(r);
    struct snap_stack *st = &s->stacks[s->nstacks];
    memset(st, 0, sizeof *st);
    st->id = -1;
    for (int b = 0; b < BY_COUNT; b++)
        st->site[b] = FRAMES_NONE;
    int rc = rd_object(r, st, stack_fields, NFIELDS(stack_fields));
    if (rc != 0)
        return rc;
    if (st->id < 1)
        return invalid(r, "has no \"id\" of 1 or more");
    if (st->entry == NULL)
        st->entry = snapshot_intern(r->ctx, "[unknown entry point]", 21);
    if (st->entry == NULL)
        return nomem(r);
    if (st->frames == NULL) {
        st->frames = arena_alloc(&r->ctx->arena, sizeof *st->frames);
        if (st->frames == NULL)
            return nomem(r);
    }
    s->nstacks++;
    return 0;
}

static int rd_stacks(struct reader *r, void *obj)
{
    if (take_null(r))
        return 0;
    return rd_array(r, obj, rd_stack);
}

/* ---- top level ---- */

/* format and version are judged after the pass (see the top of the file):
 * here they are only noted, whatever their type. */
static int rd_format(struct reader *r, void *obj)
{
    (void)obj;
    if (json_peek(&r->c) == JSON_STRING)
        return rd_raw(r, &r->format) == 0 ? 0 : json_failed(r);
    return json_skip(&r->c) == JSON_OK ? 0 : json_failed(r);
}

static int rd_version(struct reader *r, void *obj)
{
    (void)obj;
    r->have_version = true;
    if (json_get_int64(&r->c, &r->version) == JSON_OK) {
        r->version_int = true;
        return 0;
    }
    return json_skip(&r->c) == JSON_OK ? 0 : json_failed(r);
}

static const struct field top_fields[] = {
    FIELD_FN("format", rd_format),
    FIELD_FN("version", rd_version),
    FIELD(snapshot, reason, F_STRN),
    FIELD(snapshot, sequence, F_I64N),
    FIELD_FN("process", rd_process),
    FIELD_FN("config", rd_config),
    FIELD_FN("devices", rd_devices),
    FIELD_FN("host_pinned", rd_host),
    FIELD_FN("counters", rd_counters),
    FIELD_FN("oom", rd_oom),
    FIELD_FN("ooms", rd_ooms),
    FIELD_FN("events", rd_events),
    FIELD_FN("modules", rd_modules),
    FIELD_FN("stacks", rd_stacks),
};

/* Whether the document says it is ours, in a version we read. */
static int judge_header(struct reader *r, bool ours, bool have_version, bool version_int,
                        int64_t version)
{
    if (!ours)
        return errors_set(r->err, CLI_EFOREIGN,
                          "cannot read snapshot '%s': JSON but not a cumemtrace "
                          "snapshot (no \"format\": \"cumemtrace\")",
                          r->name);
    if (!have_version || !version_int)
        return errors_set(r->err, CLI_ETYPE,
                          "cannot read snapshot '%s': \"version\" is %s, expected an integer",
                          r->name, have_version ? "not an integer" : "missing");
    if (version > SNAP_FORMAT_VERSION)
        return errors_set(r->err, CLI_EVERSION,
                          "cannot read snapshot '%s': format version %lld is newer than "
                          "this cumemtrace understands (version %d)",
                          r->name, (long long)version, SNAP_FORMAT_VERSION);
    if (version < 1)
        return errors_set(r->err, CLI_EVALUE,
                          "cannot read snapshot '%s': format version %lld does not exist",
                          r->name, (long long)version);
    return 0;
}

/* The error path's second look: is the whole document JSON, and does it
 * say it is ours?  Writes nothing into buf. */
static int check_header(struct reader *r, char *buf, size_t len, int64_t *version)
{
    struct arena scratch;
    arena_init(&scratch);
    json_init(&r->c, buf, len, &scratch, false);
    struct json_cursor *c = &r->c;
    const char *format = NULL;
    bool have_version = false, version_int = false;
    int rc;
    enum json_type top = json_peek(c);
    if (top == JSON_OBJECT) {
        rc = json_enter_object(c);
        const char *key;
        while (rc == JSON_OK && (rc = json_next_member(c, &key, NULL)) == 1) {
            if (strcmp(key, "format") == 0 && json_peek(c) == JSON_STRING) {
                rc = json_get_string(c, &format, NULL);
            } else if (strcmp(key, "version") == 0) {
                have_version = true;
                version_int = json_get_int64(c, version) == JSON_OK;
                rc = version_int ? JSON_OK : json_skip(c);
            } else {
                rc = json_skip(c);
            }
        }
    } else {
        rc = json_skip(c);
    }
    if (rc >= 0)
        rc = json_finish(c);
    if (rc < 0) {
        rc = json_failed(r);
        arena_free(&scratch);
        return rc;
    }
    bool ours = format != NULL && strcmp(format, "cumemtrace") == 0;
    arena_free(&scratch);
    if (top != JSON_OBJECT)
        return errors_set(r->err, CLI_EFOREIGN,
                          "cannot read snapshot '%s': JSON but not a cumemtrace "
                          "snapshot (the document is %s, not an object)",
                          r->name, type_text(top));
    return judge_header(r, ours, have_version, version_int, *version);
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
static int sort_stacks(struct reader *r)
{
    struct snapshot *s = r->s;
    bool sorted = true;
    for (size_t i = 1; i < s->nstacks && sorted; i++)
        if (s->stacks[i - 1].id >= s->stacks[i].id)
            sorted = false;
    if (sorted)
        return 0;
    qsort(s->stacks, s->nstacks, sizeof *s->stacks, stack_cmp);
    for (size_t i = 1; i < s->nstacks; i++)
        if (s->stacks[i - 1].id == s->stacks[i].id)
            return errors_set(r->err, CLI_EVALUE,
                              "cannot read snapshot '%s': stack id %lld is defined twice",
                              r->name, (long long)s->stacks[i].id);
    return 0;
}

static int resolve_groups(struct reader *r, struct snap_groups *g, const char *where)
{
    for (size_t i = 0; i < g->n; i++) {
        struct snap_group *e = &g->v[i];
        if (e->stack_id == 0)
            continue;
        e->stack = snapshot_stack_index(r->s, e->stack_id);
        if (e->stack == SNAP_NO_STACK)
            return errors_set(r->err, CLI_EBADREF,
                              "cannot read snapshot '%s': %s[%zu] refers to stack %lld, "
                              "which \"stacks\" does not define",
                              r->name, where, i, (long long)e->stack_id);
    }
    return 0;
}

static int resolve(struct reader *r)
{
    struct snapshot *s = r->s;
    char where[64];
    for (size_t d = 0; d < s->ndevices; d++) {
        snprintf(where, sizeof where, "devices[%zu].live", d);
        if (resolve_groups(r, &s->devices[d].live, where))
            return r->err->code;
        snprintf(where, sizeof where, "devices[%zu].at_peak", d);
        if (resolve_groups(r, &s->devices[d].at_peak, where))
            return r->err->code;
    }
    if (resolve_groups(r, &s->host.live, "host_pinned.live") ||
        resolve_groups(r, &s->host.at_peak, "host_pinned.at_peak") ||
        resolve_groups(r, &s->oom.live, "oom.live") ||
        resolve_groups(r, &s->oom.released, "oom.released"))
        return r->err->code;
    if (s->oom.present && s->oom.stack_id > 0) {
        s->oom.stack = snapshot_stack_index(s, s->oom.stack_id);
        if (s->oom.stack == SNAP_NO_STACK)
            return errors_set(r->err, CLI_EBADREF,
                              "cannot read snapshot '%s': oom.stack refers to stack %lld, "
                              "which \"stacks\" does not define",
                              r->name, (long long)s->oom.stack_id);
    }
    return 0;
}

static void init_snapshot(struct snapshot *s, struct snapctx *ctx, const char *name,
                          size_t len)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->file = name;
    s->file_bytes = len;
    s->sequence = SNAP_UNKNOWN_I64;
    s->process.pid = s->process.ppid = s->process.rank = SNAP_UNKNOWN_I64;
    s->process.start_wall_ns = s->process.dump_time_ns = SNAP_UNKNOWN_I64;
    s->config.depth = s->config.event_cap = SNAP_UNKNOWN;
    s->config.python = s->config.native = -1;
    kind_stats_init(&s->host.stats);
    s->oom.stack = SNAP_NO_STACK;
    s->events.cap = s->events.recorded = SNAP_UNKNOWN;
    s->events.stride = 1;
    s->events.thinned = -1;
}

int snapshot_read_mem(struct snapctx *ctx, const char *name, char *buf,
                      size_t len, struct snapshot *out, struct cli_error *err)
{
    struct reader r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.s = out;
    r.err = err;
    r.name = name;
    r.len = len;
    arena_init(&r.scratch);
    hmap_init(&r.raw_frames, &r.scratch);
    init_snapshot(out, ctx, name, len);
    default_columns(&r);

    json_init(&r.c, buf, len, &ctx->arena, true);
    int rc = rd_object(&r, out, top_fields, NFIELDS(top_fields));
    if (rc == 0 && json_finish(&r.c) != JSON_OK)
        rc = json_failed(&r);
    if (rc == 0)
        rc = judge_header(&r, r.format != NULL && strcmp(r.format, "cumemtrace") == 0,
                          r.have_version, r.version_int, r.version);
    if (rc == 0)
        rc = sort_stacks(&r);
    if (rc == 0)
        rc = resolve(&r);
    if (rc == CLI_ETYPE || rc == CLI_EVALUE || rc == CLI_EBADREF) {
        /* A field is wrong; but if the file is also cut short, not JSON
         * further on, foreign or too new, that is the message to give.
         * Undo the NULs the pass wrote over closing quotes (every NUL
         * before the cursor is one: a NUL in the input would have stopped
         * the pass there), then look at the whole document. */
        size_t upto = (size_t)(r.c.p - buf);
        for (char *z = memchr(buf, '\0', upto); z != NULL;
             z = memchr(z + 1, '\0', upto - (size_t)(z + 1 - buf)))
            *z = '"';
        struct cli_error first = *err;
        int64_t version;
        int hrc = check_header(&r, buf, len, &version);
        if (hrc == 0)
            *err = first;
        else
            rc = hrc;
    }
    if (rc != 0)
        goto fail;
    out->version = r.version;
    /* The format promises ascending ordinals; views rely on it. */
    if (out->ndevices > 1)
        qsort(out->devices, out->ndevices, sizeof *out->devices, device_cmp);
    if (out->reason == NULL)
        out->reason = "unknown";
    if (out->events.stride == 0 || out->events.stride == SNAP_UNKNOWN)
        out->events.stride = 1;
    if (out->ooms.suppressed == 0)
        out->ooms.suppressed = out->counters.oom_dumps_suppressed;
    rc = 0;
fail:
    free(r.tmp);
    free(r.key);
    free(r.mods);
    free(r.expand);
    hmap_free(&r.raw_frames);
    arena_free(&r.scratch);
    if (rc != 0)
        snapshot_free(out);
    return rc;
}

/* Reads the whole file (any kind: regular, pipe) into a malloc'd buffer
 * with a NUL after the last byte. */
static int slurp(const char *path, char **buf, size_t *len, struct cli_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return errors_set(err, e == ENOENT ? CLI_ENOENT : CLI_EIO,
                          "cannot read snapshot '%s': %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return errors_set(err, CLI_EIO, "cannot read snapshot '%s': %s", path,
                          strerror(EISDIR));
    }
    size_t cap = (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
                     ? (size_t)st.st_size + 1
                     : 65536;
    size_t n = 0;
    char *b = malloc(cap);
    if (b == NULL) {
        close(fd);
        return errors_set(err, CLI_ENOMEM, "cannot read snapshot '%s': out of memory",
                          path);
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = cap < SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
            if (nb == NULL) {
                free(b);
                close(fd);
                return errors_set(err, CLI_ENOMEM,
                                  "cannot read snapshot '%s': out of memory", path);
            }
            b = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            free(b);
            close(fd);
            return errors_set(err, CLI_EIO, "cannot read snapshot '%s': %s", path,
                              strerror(e));
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

int snapshot_read_file(struct snapctx *ctx, const char *path,
                       struct snapshot *out, struct cli_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = slurp(path, &buf, &len, err);
    if (rc != 0)
        return rc;
    rc = snapshot_read_mem(ctx, path, buf, len, out, err);
    free(buf);
    return rc;
}
