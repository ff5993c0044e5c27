/* snapshot_write.c - turns the tracker's state into the documented JSON
 * snapshot (docs/snapshot-format.md, the contract with the CLI).
 *
 * Order: take a consistent copy of the tracker under its lock
 * (record_view_take), release it, then symbolise and write without holding
 * anything the host's threads could wait on.  Symbolisation happens here and
 * only here: dladdr() of (return address - 1) gives the module, the offset
 * from its load base (stable across ASLR) and the dynamic symbol, through a
 * direct-mapped cache because most frames repeat across stacks.
 * Output goes through a private buffer and write(2), never stdio, into a
 * temporary file published atomically by output.c.
 */
#include "snapshot_write.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator.h"
#include "clock.h"
#include "config.h"
#include "layout.h"
#include "log.h"
#include "mark.h"
#include "modules.h"
#include "oom.h"
#include "output.h"
#include "python.h"
#include "record.h"
#include "resolve.h"
#include "units.h"
#include "utf8.h"

#define TOOL_VERSION "0.1.0"
#define FORMAT_VERSION 1

/* ---- a minimal buffered JSON emitter ---- */

struct jw {
    int fd;
    int err; /* first errno, writing stops after it */
    size_t n;
    char buf[1 << 16];
};

static void jw_flush(struct jw *w)
{
    size_t off = 0;
    while (off < w->n && w->err == 0) {
        ssize_t k = write(w->fd, w->buf + off, w->n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            w->err = k < 0 ? errno : EIO;
        else
            off += (size_t)k;
    }
    w->n = 0;
}

static void jw_raw(struct jw *w, const char *s, size_t len)
{
    while (len > 0) {
        if (w->n == sizeof w->buf)
            jw_flush(w);
        size_t k = sizeof w->buf - w->n;
        if (k > len)
            k = len;
        memcpy(w->buf + w->n, s, k);
        w->n += k;
        s += k;
        len -= k;
    }
}

static void jw_s(struct jw *w, const char *s)
{
    jw_raw(w, s, strlen(s));
}

static void jw_fmt(struct jw *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void jw_fmt(struct jw *w, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        jw_raw(w, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* Integers on the paths written once per stack, frame, site and event: a
 * million-allocation snapshot spent most of its time in vsnprintf. */
static void jw_u64(struct jw *w, uint64_t v)
{
    char b[20];
    size_t i = sizeof b;
    do
        b[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    jw_raw(w, b + i, sizeof b - i);
}

static void jw_i64(struct jw *w, int64_t v)
{
    if (v < 0) {
        jw_raw(w, "-", 1);
        jw_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        jw_u64(w, (uint64_t)v);
    }
}

/* A JSON string; NULL becomes null.  The format promises UTF-8, but argv,
 * file names and symbols are arbitrary bytes: each byte that does not begin
 * a well-formed UTF-8 sequence is written as \ufffd (docs/snapshot-format.md,
 * "Strings"), so any JSON reader can load every snapshot. */
static void jw_str(struct jw *w, const char *s)
{
    if (s == NULL) {
        jw_s(w, "null");
        return;
    }
    jw_raw(w, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0) {
        uint32_t cp;
        size_t k = utf8_decode(p, left, &cp);
        if (k == 0) {
            jw_s(w, "\\ufffd");
            k = 1;
        } else if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            jw_raw(w, e, 2);
        } else if (*p < 0x20) {
            jw_fmt(w, "\\u%04x", *p);
        } else {
            jw_raw(w, (const char *)p, k);
        }
        p += k;
        left -= k;
    }
    jw_raw(w, "\"", 1);
}

/* A count that may be unknown: negative is written as null. */
static void jw_i64_or_null(struct jw *w, int64_t v)
{
    if (v < 0)
        jw_s(w, "null");
    else
        jw_fmt(w, "%" PRId64, v);
}

/* ---- symbolisation ---- */

struct sym {
    void *addr;
    const char *module; /* basename, points into dli_fname */
    const char *symbol;
    uintptr_t offset;
    uintptr_t base; /* dli_fbase; 0 when dladdr knew no module */
};

#define SYMCACHE_SIZE 65536 /* power of two; ~2.5 MiB only while dumping */

static const struct sym *symbolize(struct sym *cache, void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    struct sym *s = &cache[(a ^ (a >> 16)) & (SYMCACHE_SIZE - 1)];
    if (s->addr == addr && s->module != NULL)
        return s;
    Dl_info info;
    s->addr = addr;
    /* A return address points after the call; -1 lands inside it. */
    if (dladdr((void *)(a - 1), &info) != 0 && info.dli_fname != NULL) {
        const char *slash = strrchr(info.dli_fname, '/');
        s->module = slash ? slash + 1 : info.dli_fname;
        if (s->module[0] == '\0')
            s->module = output_process.exe;
        s->symbol = info.dli_sname;
        s->offset = a - 1 - (uintptr_t)info.dli_fbase;
        s->base = (uintptr_t)info.dli_fbase;
    } else {
        s->module = "?";
        s->symbol = NULL;
        s->offset = a - 1;
        s->base = 0;
    }
    return s;
}

/* ---- sections ---- */

static void write_process(struct jw *w, int64_t now)
{
    jw_fmt(w, "\"process\":{\"pid\":%d,\"ppid\":%d,\"exe\":", (int)getpid(),
           (int)getppid());
    jw_str(w, output_process.exe);
    jw_s(w, ",\"cmdline\":[");
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[8192];
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len > 0) {
            buf[len] = '\0';
            for (ssize_t off = 0; off < len; off += (ssize_t)strlen(buf + off) + 1) {
                if (off)
                    jw_s(w, ",");
                jw_str(w, buf + off);
            }
        }
    }
    jw_s(w, "],\"host\":");
    jw_str(w, output_process.host);
    jw_s(w, ",\"rank\":");
    jw_i64_or_null(w, output_process.rank);
    jw_s(w, ",\"local_rank\":");
    jw_i64_or_null(w, output_process.local_rank);
    jw_s(w, ",\"world_size\":");
    jw_i64_or_null(w, output_process.world_size);
    jw_fmt(w, ",\"start_wall_ns\":%lld,\"dump_time_ns\":%" PRId64
              ",\"tool_version\":\"" TOOL_VERSION "\"},\n",
           output_process.start_wall_ns, now);
}

static void write_config(struct jw *w)
{
    jw_fmt(w, "\"config\":{\"depth\":%u,\"event_cap\":%zu,\"limit_bytes\":[",
           config.depth, config.event_cap);
    bool first = true;
    for (int d = 0; d < RECORD_MAX_DEVICES; d++) {
        uint64_t l = record_limit(d);
        if (l == 0 || (l == config.limit_all && d > 0))
            continue;
        jw_fmt(w, "%s{\"device\":%d,\"bytes\":%" PRIu64 "}", first ? "" : ",",
               d, l);
        first = false;
    }
    jw_fmt(w, "],\"python\":%s,\"native\":%s,\"temporary_ms\":%" PRIu64 "},\n",
           config.python ? "true" : "false", config.native ? "true" : "false",
           config.temporary_ms);
}

static void write_kind_stats(struct jw *w, const struct record_kind_stats *k)
{
    jw_fmt(w, "{\"current_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64
              ",\"peak_time_ns\":%" PRId64 ",\"allocs\":%" PRIu64
              ",\"frees\":%" PRIu64 ",\"failures\":%" PRIu64 "}",
           k->current, k->peak, k->peak_time, k->allocs, k->frees, k->failures);
}

/* Sites by pool, then bytes (xb, yb) largest first, then stack id: a
 * stable order, so two dumps of the same state are the same file. */
static int site_order(const struct record_site_view *x,
                      const struct record_site_view *y, uint64_t xb, uint64_t yb)
{
    if (x->pool != y->pool)
        return x->pool < y->pool ? -1 : 1;
    if (xb != yb)
        return xb > yb ? -1 : 1;
    return x->stack->id < y->stack->id ? -1 : x->stack->id > y->stack->id;
}

static int by_pool_current(const void *a, const void *b)
{
    const struct record_site_view *x = a, *y = b;
    return site_order(x, y, x->current, y->current);
}

static int by_pool_peak(const void *a, const void *b)
{
    const struct record_site_view *x = a, *y = b;
    return site_order(x, y, x->at_peak, y->at_peak);
}

static int by_pool_mark_peak(const void *a, const void *b)
{
    const struct record_site_view *x = a, *y = b;
    return site_order(x, y, x->mark_at_peak, y->mark_at_peak);
}

enum groups_of { GROUPS_LIVE, GROUPS_AT_PEAK, GROUPS_AT_MARK_PEAK };

/* Sites of `pool` in the order of the last sort, `which` picking the field;
 * at most `max` groups (0 = all). */
static void write_groups(struct jw *w, const struct record_view *v,
                         uint32_t pool, enum groups_of which, size_t max)
{
    size_t n = 0;
    bool peak = which != GROUPS_LIVE;
    jw_s(w, "[");
    for (size_t i = 0; i < v->nsites; i++) {
        const struct record_site_view *s = &v->sites[i];
        uint64_t bytes = which == GROUPS_AT_PEAK        ? s->at_peak
                         : which == GROUPS_AT_MARK_PEAK ? s->mark_at_peak
                                                        : s->current;
        uint64_t count = which == GROUPS_AT_PEAK        ? s->at_peak_count
                         : which == GROUPS_AT_MARK_PEAK ? s->mark_at_peak_count
                                                        : s->count;
        if (s->pool != pool || (bytes == 0 && count == 0))
            continue;
        if (max && n == max)
            break;
        jw_s(w, n++ ? ",\n  " : "\n  ");
        jw_s(w, "{\"stack\":");
        jw_u64(w, s->stack->id);
        if (!peak) {
            jw_s(w, ",\"kind\":\"");
            jw_s(w, record_kind_name(s->kind));
            jw_raw(w, "\"", 1);
        }
        jw_s(w, ",\"bytes\":");
        jw_u64(w, bytes);
        jw_s(w, ",\"count\":");
        jw_u64(w, count);
        jw_raw(w, "}", 1);
    }
    jw_s(w, "]");
}

static int by_pool_allocs(const void *a, const void *b)
{
    const struct record_site_view *x = a, *y = b;
    if (x->pool != y->pool)
        return x->pool < y->pool ? -1 : 1;
    if (x->allocs != y->allocs)
        return x->allocs > y->allocs ? -1 : 1;
    return x->stack->id < y->stack->id ? -1 : x->stack->id > y->stack->id;
}

/* Per call site over the whole run: allocations, frees, bytes allocated,
 * temporary frees (docs/snapshot-format.md "churn"), most allocations first. */
static void write_churn(struct jw *w, struct record_view *v, uint32_t pool)
{
    qsort(v->sites, v->nsites, sizeof *v->sites, by_pool_allocs);
    jw_s(w, ",\n \"churn\":[");
    size_t n = 0;
    for (size_t i = 0; i < v->nsites; i++) {
        const struct record_site_view *s = &v->sites[i];
        if (s->pool != pool || s->allocs == 0)
            continue;
        jw_fmt(w, "%s{\"stack\":%u,\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64
                  ",\"bytes_allocated\":%" PRIu64 ",\"temporary\":%" PRIu64 "}",
               n++ ? ",\n  " : "\n  ", s->stack->id, s->allocs, s->frees, s->alloc_bytes,
               s->temporary);
    }
    jw_s(w, "]");
}

static void write_live_and_peak(struct jw *w, struct record_view *v,
                                uint32_t pool)
{
    qsort(v->sites, v->nsites, sizeof *v->sites, by_pool_current);
    jw_s(w, ",\"live\":");
    write_groups(w, v, pool, GROUPS_LIVE, 0);
    qsort(v->sites, v->nsites, sizeof *v->sites, by_pool_peak);
    jw_s(w, ",\"at_peak\":");
    write_groups(w, v, pool, GROUPS_AT_PEAK, 0);
}

/* The peak since the innermost mark (cumemtrace_mark_begin), only while
 * one is active. */
static void write_mark(struct jw *w, struct record_view *v, uint32_t pool)
{
    int depth = mark_depth();
    if (depth == 0)
        return;
    const struct record_mark *m = &v->pools[pool].mark;
    jw_fmt(w, ",\n \"mark\":{\"depth\":%d,\"time_ns\":%" PRId64 ",\"base_bytes\":%"
              PRIu64 ",\"peak_bytes\":%" PRIu64 ",\"peak_time_ns\":%" PRId64
              ",\"at_peak\":",
           depth, m->time, m->base, m->peak, m->peak_time);
    if (m->sites_valid) {
        qsort(v->sites, v->nsites, sizeof *v->sites, by_pool_mark_peak);
        write_groups(w, v, pool, GROUPS_AT_MARK_PEAK, 0);
    } else {
        jw_s(w, "null");
    }
    jw_s(w, "}");
}

/* top_tensors: null without the allocator's history, else each site's
 * "file:line:function" lines as frames. */
static void write_top_tensors(struct jw *w, const struct allocator_facts *f)
{
    jw_s(w, ",\"top_tensors\":");
    if (f->ntop < 0) {
        jw_s(w, "null");
        return;
    }
    jw_s(w, "[");
    for (int i = 0; i < f->ntop; i++) {
        const struct allocator_tensor_site *t = &f->top[i];
        jw_s(w, i ? ",{\"stack\":[" : "{\"stack\":[");
        char buf[ALLOCATOR_STACK_MAX];
        memcpy(buf, t->stack, sizeof buf);
        char *save = NULL;
        bool first = true;
        for (char *line = strtok_r(buf, "\n", &save); line != NULL;
             line = strtok_r(NULL, "\n", &save)) {
            char *fn = strrchr(line, ':');
            if (fn == NULL || fn == line)
                continue;
            *fn = '\0';
            char *ln = strrchr(line, ':');
            if (ln == NULL)
                continue;
            *ln = '\0';
            jw_s(w, first ? "{\"file\":" : ",{\"file\":");
            first = false;
            jw_str(w, line);
            jw_fmt(w, ",\"line\":%ld,\"function\":", strtol(ln + 1, NULL, 10));
            jw_str(w, fn + 1);
            jw_s(w, "}");
        }
        jw_fmt(w, "],\"bytes\":%" PRId64 ",\"count\":%" PRId64 "}", t->bytes, t->count);
    }
    jw_s(w, "]");
}

/* The caching allocator's own figures (null when it did not speak), its
 * configuration parsed as PyTorch reads it: "key:value,key:value". */
static void write_allocator(struct jw *w, const struct allocator_facts *f)
{
    if (f == NULL) {
        jw_s(w, "null");
        return;
    }
    jw_s(w, "{\"name\":");
    jw_str(w, f->name);
    jw_s(w, ",\"version\":");
    jw_str(w, f->version[0] ? f->version : NULL);
    const struct {
        const char *key;
        int64_t v;
    } n[] = {
        {"requested_bytes", f->requested},
        {"allocated_bytes", f->allocated},
        {"reserved_bytes", f->reserved},
        {"active_bytes", f->active},
        {"reserved_unallocated_bytes", allocator_unallocated(f)},
        {"inactive_split_bytes", f->inactive_split},
        {"segments", f->segments},
        {"num_alloc_retries", f->num_alloc_retries},
        {"num_ooms", f->num_ooms},
        {"limit_bytes", f->limit},
        {"device_total_bytes", f->device_total},
        {"device_free_bytes", f->device_free},
    };
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        jw_fmt(w, ",\"%s\":", n[i].key);
        jw_i64_or_null(w, n[i].v);
    }
    jw_s(w, ",\"largest_free_block_bytes\":{\"small\":");
    jw_i64_or_null(w, f->largest_free_small);
    jw_s(w, ",\"large\":");
    jw_i64_or_null(w, f->largest_free_large);
    jw_s(w, "},\"config\":{");
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
        jw_s(w, first ? "" : ",");
        first = false;
        jw_str(w, item);
        jw_s(w, ":");
        jw_str(w, colon + 1);
    }
    jw_s(w, "}");
    write_top_tensors(w, f);
    jw_s(w, "}");
}

static void write_device(struct jw *w, struct record_view *v, int d)
{
    const struct record_pool_view *p = &v->pools[d];
    jw_fmt(w, "{\"ordinal\":%d,\"total_bytes\":", d);
    jw_i64_or_null(w, p->total_bytes);
    jw_s(w, ",\"free_bytes\":");
    jw_i64_or_null(w, p->free_bytes);
    jw_s(w, ",\"limit_bytes\":");
    jw_i64_or_null(w, p->limit ? (int64_t)p->limit : -1);
    jw_fmt(w, ",\"current_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64
              ",\"peak_time_ns\":%" PRId64 ",\n \"by_kind\":{",
           p->current, p->peak, p->peak_time);
    for (int k = 0; k < KIND_HOST_PINNED; k++) {
        jw_fmt(w, "%s\"%s\":", k ? "," : "", record_kind_name(k));
        write_kind_stats(w, &p->kinds[k]);
    }
    jw_fmt(w, "},\n \"vmm\":{\"reserved_bytes\":%" PRIu64 ",\"mapped_bytes\":%" PRIu64
              ",\"physical_bytes\":%" PRIu64 ",\"reserved_peak_bytes\":%" PRIu64
              ",\"mapped_peak_bytes\":%" PRIu64 "},\n \"histogram\":[",
           p->vmm.reserved, p->vmm.mapped, p->kinds[KIND_VMM].current,
           p->vmm.reserved_peak, p->vmm.mapped_peak);
    bool first = true;
    for (int b = 0; b < 65; b++) {
        if (p->hist_count[b] == 0)
            continue;
        jw_fmt(w, "%s{\"le\":%" PRIu64 ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
               first ? "" : ",", b == 64 ? UINT64_MAX : (uint64_t)1 << b,
               p->hist_count[b], p->hist_bytes[b]);
        first = false;
    }
    jw_fmt(w, "],\n \"fragmentation\":{\"granularity_bytes\":%u,\"requested_bytes\":%"
              PRIu64 ",\"rounded_bytes\":%" PRIu64 ",\"small_count\":%" PRIu64
              ",\"small_bytes\":%" PRIu64 "}",
           RECORD_GRANULARITY, p->requested, p->rounded, p->small_count,
           p->small_bytes);
    struct allocator_facts latest;
    jw_s(w, ",\n \"allocator\":");
    write_allocator(w, allocator_latest(d, &latest) ? &latest : NULL);
    write_live_and_peak(w, v, (uint32_t)d);
    write_churn(w, v, (uint32_t)d);
    write_mark(w, v, (uint32_t)d);
    jw_s(w, "}");
}

static void write_host(struct jw *w, struct record_view *v)
{
    const struct record_pool_view *p = &v->pools[RECORD_HOST_POOL];
    const struct record_kind_stats *k = &p->kinds[KIND_HOST_PINNED];
    jw_fmt(w, "\"host_pinned\":{\"current_bytes\":%" PRIu64 ",\"peak_bytes\":%"
              PRIu64 ",\"peak_time_ns\":%" PRId64 ",\"allocs\":%" PRIu64
              ",\"frees\":%" PRIu64 ",\"failures\":%" PRIu64,
           p->current, p->peak, p->peak_time, k->allocs, k->frees, k->failures);
    write_live_and_peak(w, v, RECORD_HOST_POOL);
    write_churn(w, v, RECORD_HOST_POOL);
    jw_s(w, "},\n");
}

static void jw_emit(void *w, const char *s, size_t n)
{
    jw_raw(w, s, n);
}

static void write_oom(struct jw *w, struct record_view *v,
                      const struct oom_info *o)
{
    if (o == NULL) {
        jw_s(w, "\"oom\":null,\n");
        return;
    }
    jw_fmt(w, "\"oom\":{\"requested_bytes\":%" PRIu64 ",\"device\":%d,"
              "\"kind\":\"%s\",\"entry_point\":\"%s\",\"thread\":%u,"
              "\"time_ns\":%" PRId64 ",\"stack\":%u,\"total_bytes\":",
           o->requested, o->device, record_kind_name(o->kind),
           o->by_allocator ? o->allocator.name : resolve_name(o->slot), o->tid,
           o->time_ns, o->stack);
    jw_i64_or_null(w, o->total_bytes);
    jw_s(w, ",\"free_bytes\":");
    jw_i64_or_null(w, o->free_bytes);
    jw_s(w, ",\"limit_bytes\":");
    jw_i64_or_null(w, o->limit ? (int64_t)o->limit : -1);
    jw_fmt(w, ",\"tracked_bytes\":%" PRIu64 ",\"untracked_bytes\":", o->tracked);
    jw_i64_or_null(w, o->total_bytes >= 0 ? (int64_t)o->untracked : -1);
    jw_s(w, ",\"by_kind\":{");
    for (int k = 0; k < KIND_HOST_PINNED; k++)
        jw_fmt(w, "%s\"%s\":%" PRIu64, k ? "," : "", record_kind_name(k),
               o->by_kind[k]);
    jw_fmt(w, "},\"cause\":\"%s\",\"shortfall_bytes\":%" PRIu64
              ",\"attempts\":%u,\"recovered\":%s,\"released_bytes\":%" PRIu64
              ",\"released_count\":%" PRIu64 ",\"released\":[",
           o->cause, o->shortfall, o->attempts, o->recovered ? "true" : "false",
           o->released_bytes, o->released_count);
    unsigned order[16], n = o->nreleased_by; /* largest first */
    for (unsigned i = 0; i < n; i++) {
        unsigned j = i;
        for (; j > 0 && o->released_by[order[j - 1]].bytes < o->released_by[i].bytes; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    for (unsigned i = 0; i < n; i++)
        jw_fmt(w, "%s{\"stack\":%u,\"bytes\":%" PRIu64 ",\"count\":%" PRIu64 "}",
               i ? "," : "", o->released_by[order[i]].stack,
               o->released_by[order[i]].bytes, o->released_by[order[i]].count);
    jw_s(w, "],\"allocator\":");
    write_allocator(w, o->has_allocator ? &o->allocator : NULL);
    jw_s(w, ",\n \"layout\":");
    layout_write(o->device, o->requested,
                 o->has_allocator ? o->allocator.num_ooms : -1, jw_emit, w);
    jw_s(w, ",\"live\":");
    qsort(v->sites, v->nsites, sizeof *v->sites, by_pool_current);
    write_groups(w, v, o->device < 0 ? RECORD_HOST_POOL : (uint32_t)o->device,
                 false, 50);
    jw_s(w, "},\n");
}

static void write_ooms(struct jw *w)
{
    struct oom_summary *s = malloc(sizeof *s);
    if (s == NULL) {
        jw_s(w, "\"ooms\":{\"count\":0,\"failed_attempts\":0,\"recovered\":0,"
                "\"retry_released_bytes\":0,\"dumps\":[]},\n");
        return;
    }
    oom_summary_get(s);
    jw_fmt(w, "\"ooms\":{\"count\":%" PRIu64 ",\"failed_attempts\":%" PRIu64
              ",\"recovered\":%" PRIu64 ",\"retry_released_bytes\":%" PRIu64
              ",\"suppressed\":%" PRIu64 ",\"dumps\":[",
           s->count, s->failed_attempts, s->recovered, s->retry_released_bytes,
           s->suppressed);
    for (unsigned i = 0; i < s->ndumps; i++) {
        if (i)
            jw_s(w, ",");
        jw_str(w, s->dumps[i]);
    }
    jw_s(w, "],\n \"attempts\":[");
    for (unsigned i = 0; i < s->nattempts; i++) {
        const struct oom_attempt *a = &s->attempts[i];
        jw_fmt(w, "%s{\"t_ns\":%" PRId64 ",\"device\":%d,\"requested_bytes\":%" PRIu64
                  ",\"chain\":%u,\"attempt\":%u,\"outcome\":\"%s\"}",
               i ? "," : "", a->t_ns, a->device, a->requested, a->chain,
               (unsigned)a->attempt, a->recovered ? "recovered" : "failed");
    }
    jw_s(w, "]},\n");
    free(s);
}

/* Rows of the event log from `from` on (a stream checkpoint writes only
 * those its predecessors did not: struct snapshot_events). */
static void write_events(struct jw *w, const struct record_view *v, size_t from)
{
    /* stride: how many events each kept row stands for, on average */
    uint64_t stride = 1;
    if (v->event_bucket_ns != 0 && v->nevents > 0)
        stride = (v->events_recorded + v->nevents - 1) / v->nevents;
    jw_fmt(w, "\"events\":{\"cap\":%zu,\"recorded\":%" PRIu64 ",\"stride\":%" PRIu64
              ",\"thinned\":%s,\"bucket_ns\":%" PRIu64 ",\"columns\":[\"t_ns\",\"device\","
              "\"kind\",\"delta\",\"stack\",\"current\"],\"data\":[",
           v->event_cap, v->events_recorded, stride,
           v->event_bucket_ns != 0 ? "true" : "false", v->event_bucket_ns);
    for (size_t i = from; i < v->nevents; i++) {
        const struct record_event *e = &v->events[i];
        jw_s(w, i > from ? ",\n [" : "\n [");
        jw_i64(w, e->t_ns);
        jw_raw(w, ",", 1);
        jw_i64(w, e->pool);
        jw_s(w, ",\"");
        jw_s(w, record_kind_name(e->kind));
        jw_s(w, "\",");
        jw_i64(w, e->delta);
        jw_raw(w, ",", 1);
        jw_u64(w, e->stack);
        jw_raw(w, ",", 1);
        jw_u64(w, e->current);
        jw_raw(w, "]", 1);
    }
    jw_s(w, "]},\n");
}

/* A Python frame {module:"python", file, line, function} or a marker
 * frame {marker} (python.c). */
static void write_python_frame(struct jw *w, bool comma,
                               enum python_frame_kind k,
                               const struct python_frame *py)
{
    jw_s(w, comma ? ",{" : "{");
    if (k == PYTHON_FRAME_MARKER) {
        jw_s(w, "\"marker\":");
        jw_str(w, py->marker);
    } else {
        jw_s(w, "\"module\":\"python\",\"file\":");
        jw_str(w, py->file);
        jw_fmt(w, ",\"line\":%d,\"function\":", py->line);
        jw_str(w, py->function);
    }
    jw_s(w, "}");
}

/* The modules the stacks' native frames lie in, one row each, before the
 * stacks (the CLI reads in one pass): path, build-id and the ELF vaddr of
 * offset 0, so that DWARF can be consulted later, elsewhere. */
static void write_modules(struct jw *w, const struct record_view *v, struct sym *cache)
{
    struct module_info *mods = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < v->nstacks && cache != NULL; i++) {
        const struct record_stack *s = v->stacks[i];
        for (unsigned f = 0; f < s->depth; f++) {
            struct python_frame py;
            if (python_frame_decode(s->frames[f], &py) != PYTHON_FRAME_NATIVE)
                continue;
            const struct sym *y = symbolize(cache, s->frames[f]);
            if (y->base == 0)
                continue;
            size_t k = 0;
            while (k < n && mods[k].base != y->base)
                k++;
            if (k < n)
                continue;
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 16;
                struct module_info *m = realloc(mods, ncap * sizeof *m);
                if (m == NULL)
                    goto out;
                mods = m;
                cap = ncap;
            }
            mods[n].base = y->base;
            mods[n].name = y->module;
            n++;
        }
    }
    modules_describe(mods, n);
    jw_s(w, "\"modules\":[");
    bool first = true;
    for (size_t k = 0; k < n; k++) {
        const struct module_info *m = &mods[k];
        if (!m->found)
            continue;
        jw_s(w, first ? "\n {\"name\":" : ",\n {\"name\":");
        first = false;
        jw_str(w, m->name);
        jw_s(w, ",\"path\":");
        jw_str(w, m->path[0] ? m->path : NULL);
        jw_s(w, ",\"build_id\":");
        if (m->build_id_len == 0) {
            jw_s(w, "null");
        } else {
            char hex[2 * MODULE_BUILD_ID_MAX + 1];
            for (size_t b = 0; b < m->build_id_len; b++)
                snprintf(hex + 2 * b, 3, "%02x", m->build_id[b]);
            jw_str(w, hex);
        }
        jw_fmt(w, ",\"vaddr_base\":%" PRIuPTR "}", m->vaddr_base);
    }
    jw_s(w, "],\n");
out:
    free(mods);
}

static void write_stacks(struct jw *w, const struct record_view *v)
{
    struct sym *cache = calloc(SYMCACHE_SIZE, sizeof *cache);
    write_modules(w, v, cache);
    jw_s(w, "\"stacks\":[");
    for (size_t i = 0; i < v->nstacks; i++) {
        const struct record_stack *s = v->stacks[i];
        jw_s(w, i ? ",\n {\"id\":" : "\n {\"id\":");
        jw_u64(w, s->id);
        jw_s(w, ",\"entry\":");
        jw_str(w, s->entry == 0xffff ? "unknown" : resolve_name(s->entry));
        jw_s(w, ",\"frames\":[");
        for (unsigned f = 0; f < s->depth; f++) {
            struct sym one;
            const struct sym *y;
            struct python_frame py;
            enum python_frame_kind k = python_frame_decode(s->frames[f], &py);
            if (k != PYTHON_FRAME_NATIVE) {
                write_python_frame(w, f != 0, k, &py);
                continue;
            }
            if (cache != NULL) {
                y = symbolize(cache, s->frames[f]);
            } else {
                memset(&one, 0, sizeof one);
                y = symbolize(&one, s->frames[f]); /* cache of one */
            }
            jw_s(w, f ? ",{\"module\":" : "{\"module\":");
            jw_str(w, y->module);
            jw_s(w, ",\"offset\":");
            jw_u64(w, y->offset);
            jw_s(w, ",\"symbol\":");
            jw_str(w, y->symbol);
            jw_s(w, "}");
        }
        jw_s(w, "]}");
    }
    jw_s(w, "]\n");
    free(cache);
}

static void write_document(struct jw *w, struct record_view *v,
                           const char *reason, unsigned seq,
                           const struct oom_info *oom, const char *signame,
                           int64_t now, size_t events_from)
{
    jw_fmt(w, "{\"format\":\"cumemtrace\",\"version\":%d,\"reason\":\"%s\","
              "\"sequence\":%u,\n",
           FORMAT_VERSION, reason, seq);
    if (signame != NULL)
        jw_fmt(w, "\"signal\":\"%s\",\n", signame);
    write_process(w, now);
    write_config(w);
    jw_s(w, "\"devices\":[");
    bool first = true;
    for (int d = 0; d < RECORD_MAX_DEVICES; d++) {
        if (!v->pools[d].active)
            continue;
        jw_s(w, first ? "\n" : ",\n");
        write_device(w, v, d);
        first = false;
    }
    jw_s(w, "],\n");
    write_host(w, v);
    jw_fmt(w, "\"counters\":{\"unknown_frees\":%" PRIu64 ",\"wrong_kind_frees\":%"
              PRIu64 ",\"reentrant_untracked\":%" PRIu64 ",\"failed_frees\":%"
              PRIu64 ",\"stacks\":%" PRIu64 ",\"live_allocations\":%" PRIu64 "},\n",
           v->counters.unknown_frees, v->counters.wrong_kind_frees,
           v->counters.reentrant_untracked,
           v->counters.failed_frees,
           v->counters.stacks, v->counters.live);
    write_oom(w, v, oom);
    write_ooms(w);
    write_events(w, v, events_from);
    write_stacks(w, v);
    jw_s(w, "}\n");
}

static void announce(const char *path, const struct record_view *v)
{
    uint64_t peak = 0;
    int dev = -1;
    for (int d = 0; d < RECORD_MAX_DEVICES; d++)
        if (v->pools[d].active && v->pools[d].peak >= peak) {
            peak = v->pools[d].peak;
            dev = d;
        }
    char b[32];
    if (dev >= 0)
        log_msg(LOG_INFO, "wrote %s (peak %s on GPU %d)", path,
                units_format_bytes(peak, b, sizeof b), dev);
    else
        log_msg(LOG_INFO, "wrote %s", path);
}

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char name[16];
    unsigned next;
} counters[8];

/* The next file number of `reason`, from 0. */
static unsigned reason_index(const char *reason)
{
    unsigned n = 0;
    pthread_mutex_lock(&names_lock);
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        if (counters[i].name[0] == '\0')
            snprintf(counters[i].name, sizeof counters[i].name, "%s", reason);
        if (strncmp(counters[i].name, reason, sizeof counters[i].name - 1) == 0) {
            n = counters[i].next++;
            break;
        }
    }
    pthread_mutex_unlock(&names_lock);
    return n;
}

void snapshot_name_release(const char *reason, const char *path)
{
    char key[24];
    snprintf(key, sizeof key, ".%s.", reason);
    const char *at = NULL;
    for (const char *p = strstr(path, key); p != NULL; p = strstr(p + 1, key))
        at = p;
    if (at == NULL)
        return;
    char *end;
    unsigned long index = strtoul(at + strlen(key), &end, 10);
    if (end == at + strlen(key) || (*end != '\0' && *end != '.'))
        return;
    pthread_mutex_lock(&names_lock);
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        if (strncmp(counters[i].name, reason, sizeof counters[i].name - 1) == 0 &&
            counters[i].next == index + 1) {
            counters[i].next--;
            break;
        }
    pthread_mutex_unlock(&names_lock);
}

static int write_snapshot(const char *reason, const char *path,
                          const struct oom_info *oom, bool replace,
                          const char *signame, char *out_path, size_t out_len)
{
    static unsigned sequence;
    unsigned seq = __atomic_fetch_add(&sequence, 1, __ATOMIC_RELAXED);
    /* File names number each reason's new files from 0 without gaps
     * (oom.0, oom.1, ...): rewrites of a post-mortem take no number. */
    unsigned index = 0;
    if (path == NULL)
        index = reason_index(reason);
    char final[4096], tmp[4200], actual[4200];
    /* cumemtrace_dump(path) chose its own place: the variable is no fix */
    const char *fix = path != NULL && oom == NULL
                          ? "pass cumemtrace_dump() a path in a writable directory"
                          : "set CUMEMTRACE_OUTPUT to a writable directory";

    if (path != NULL) {
        snprintf(final, sizeof final, "%s", path);
    } else if (output_expand(output_pattern(), reason, index, final, sizeof final) != 0) {
        char b[96];
        log_msg(LOG_WARN, "cannot name the snapshot: CUMEMTRACE_OUTPUT='%s' "
                          "expands to more than %zu bytes; set a shorter one",
                log_abbrev(output_pattern(), b, sizeof b), sizeof final - 1);
        return -1;
    }

    struct record_view v;
    if (record_view_take(&v) != 0) {
        log_msg(LOG_WARN, "cannot write snapshot '%s': out of memory", final);
        return -1;
    }
    struct jw *w = malloc(sizeof *w);
    int fd = w ? output_open_temp(final, tmp, sizeof tmp) : -1;
    if (fd < 0) {
        int err = w ? errno : ENOMEM;
        log_msg(LOG_WARN, "cannot write snapshot '%s': %s (%s)", final,
                strerror(err), fix);
        free(w);
        record_view_free(&v);
        return -1;
    }
    w->fd = fd;
    w->err = 0;
    w->n = 0;
    write_document(w, &v, reason, seq, oom, signame, clock_now_ns(), 0);
    jw_flush(w);
    int err = w->err;
    /* The copy keeps the temporary's lock (it belongs to the open file)
     * until the name is published; close() is where NFS reports errors. */
    int hold = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (close(fd) != 0 && err == 0)
        err = errno;
    free(w);
    if (err != 0) {
        unlink(tmp);
        if (hold >= 0)
            close(hold);
        log_msg(LOG_WARN, "cannot write snapshot '%s': %s (free some space, or %s)",
                final, strerror(err), fix);
        record_view_free(&v);
        return -1;
    }
    int committed = output_commit(tmp, final, replace, actual, sizeof actual);
    err = errno;
    if (hold >= 0)
        close(hold);
    if (committed != 0) {
        log_msg(LOG_WARN, "cannot write snapshot '%s': %s (%s)", final,
                strerror(err), fix);
        record_view_free(&v);
        return -1;
    }
    if (!replace) {
        output_manifest(actual, reason, signame);
        if (oom == NULL)
            announce(actual, &v);
    }
    if (out_path != NULL)
        snprintf(out_path, out_len, "%s", actual);
    record_view_free(&v);
    return 0;
}

int snapshot_write(const char *reason, const char *path,
                   const struct oom_info *oom, char *out_path, size_t out_len)
{
    return write_snapshot(reason, path, oom, path != NULL && oom != NULL, NULL,
                          out_path, out_len);
}

int snapshot_write_signal(const char *signame, char *out_path, size_t out_len)
{
    return write_snapshot("signal", NULL, NULL, false, signame, out_path, out_len);
}

int snapshot_rewrite(const char *reason, const char *path)
{
    return write_snapshot(reason, path, NULL, true, NULL, NULL, 0);
}

int snapshot_serialise(int fd, const char *reason, struct snapshot_events *ev,
                       int64_t *time_ns)
{
    struct record_view v;
    if (record_view_take(&v) != 0) {
        errno = ENOMEM;
        return -1;
    }
    struct jw *w = malloc(sizeof *w);
    if (w == NULL) {
        record_view_free(&v);
        errno = ENOMEM;
        return -1;
    }
    /* New rows: the last (recorded now - recorded then) of an unthinned
     * log; in a thinned one, those stamped after the last row written. */
    size_t from = 0;
    if (ev != NULL && ev->recorded > 0) {
        if (v.event_bucket_ns == 0 && v.events_recorded >= ev->recorded) {
            uint64_t fresh = v.events_recorded - ev->recorded;
            from = fresh < v.nevents ? v.nevents - (size_t)fresh : 0;
        } else {
            while (from < v.nevents && v.events[from].t_ns <= ev->last_t_ns)
                from++;
        }
    }
    w->fd = fd;
    w->err = 0;
    w->n = 0;
    int64_t now = clock_now_ns();
    write_document(w, &v, reason, 0, NULL, NULL, now, ev != NULL ? v.nevents : 0);
    jw_flush(w);
    int err = w->err;
    free(w);
    if (ev != NULL) {
        ev->rows = NULL;
        ev->nrows = v.nevents - from;
        if (ev->nrows > 0 && err == 0 &&
            (ev->rows = malloc(ev->nrows * sizeof *ev->rows)) == NULL)
            err = ENOMEM;
        if (err == 0) {
            if (ev->nrows > 0)
                memcpy(ev->rows, v.events + from, ev->nrows * sizeof *ev->rows);
            ev->recorded = v.events_recorded;
            if (v.nevents > 0)
                ev->last_t_ns = v.events[v.nevents - 1].t_ns;
        } else {
            ev->nrows = 0;
        }
    }
    record_view_free(&v);
    if (time_ns != NULL)
        *time_ns = now;
    errno = err;
    return err == 0 ? 0 : -1;
}
