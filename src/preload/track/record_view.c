/* record_view.c - what the tracker tells: the peak since a mark
 * (cumemtrace_mark_begin), the cheap per-pool queries (current bytes, per
 * kind, activity) and the consistent copy a dump takes (record_view_take).
 * Every reading is taken under record_lock (record_impl.h), so it never
 * sees half an event; stacks are immutable, so a view points at them. */
#include "record_impl.h"

#include <stdlib.h>

#include "event_log.h"

/* ---- queries ---- */

uint64_t record_current(int pool)
{
    uint64_t v;
    record_lock_take(&record_lock);
    v = record_pools[pool < 0 ? RECORD_HOST_POOL : record_pool_of(KIND_DEVICE, pool)].current;
    record_lock_drop(&record_lock);
    return v;
}

void record_pool_kinds(int pool, uint64_t out[KIND_COUNT])
{
    uint32_t p = pool < 0 ? RECORD_HOST_POOL : record_pool_of(KIND_DEVICE, pool);
    record_lock_take(&record_lock);
    for (int k = 0; k < KIND_COUNT; k++)
        out[k] = record_pools[p].kinds[k].current;
    record_lock_drop(&record_lock);
}

/* ---- marks ---- */

int record_mark_depth;

void record_mark_set(struct record_mark saved[RECORD_POOLS], int64_t now)
{
    record_lock_take(&record_lock);
    record_mark_depth++;
    for (int i = 0; i < RECORD_POOLS; i++) {
        struct record_mark *m = &record_pools[i].mark;
        saved[i] = *m;
        /* Every site's current is its share of the new mark's peak. */
        m->base = m->peak = record_pools[i].current;
        m->time = m->peak_time = now;
        m->epoch++;
        m->sites_valid = true;
    }
    record_lock_drop(&record_lock);
}

void record_mark_restore(const struct record_mark saved[RECORD_POOLS])
{
    record_lock_take(&record_lock);
    record_mark_depth--;
    for (int i = 0; i < RECORD_POOLS; i++) {
        struct record_mark *m = &record_pools[i].mark, inner = *m;
        *m = saved[i];
        m->epoch = inner.epoch; /* sites compare against it: keep it moving */
        if (inner.peak > saved[i].peak) {
            m->peak = inner.peak;
            m->peak_time = inner.peak_time;
            m->sites_valid = inner.sites_valid;
        } else {
            m->sites_valid = false;
        }
    }
    record_lock_drop(&record_lock);
}

bool record_mark_get(int pool, struct record_mark *m, uint64_t *current)
{
    record_lock_take(&record_lock);
    struct pool *p = &record_pools[pool < 0 ? RECORD_HOST_POOL : record_pool_of(KIND_DEVICE, pool)];
    *m = p->mark;
    *current = p->current;
    bool active = p->active;
    record_lock_drop(&record_lock);
    return active;
}

/* ---- dump support ---- */

static unsigned bucket_of(uint64_t size)
{
    if (size <= 1)
        return 0;
    return 64 - (unsigned)__builtin_clzll(size - 1);
}

/* Walks every live entry: a 1M-entry table is ~32 MiB of entries in hash
 * order, so each is a cache miss; the entries a few slots ahead are
 * prefetched, and `pool_of` (each site's pool by site index, or NULL)
 * spares the two further misses of site_of(). */
static void histogram_locked(struct record_view *v, const struct addr_table *t,
                             const uint8_t *pool_of)
{
    RECORD_ASSERT_LOCKED();
    enum { AHEAD = 16 };
    const struct table_slot *slots = t->slots; /* v's stores cannot move them */
    uint32_t n = table_size(t), mask = t->mask;
    for (uint32_t i = 0; i < n; i++) {
        /* a prefetch never faults: an empty slot's NULL costs nothing */
        __builtin_prefetch(slots[(i + AHEAD) & mask].e);
        const struct live *e = slots[i].e;
        if (e == NULL)
            continue;
        uint32_t pool = pool_of != NULL ? pool_of[e->site & ~HANDLE_BIT] : site_of(e)->s.pool;
        struct record_pool_view *pv = &v->pools[pool];
        uint64_t size = entry_size(e);
        unsigned b = bucket_of(size);
        pv->hist_count[b]++;
        pv->hist_bytes[b] += size;
        pv->requested += is_handle(e) ? size : size - entry_extra(e);
        if (size >= (1u << 20)) {
            pv->rounded += (size + RECORD_GRANULARITY - 1) /
                           RECORD_GRANULARITY * RECORD_GRANULARITY;
        } else {
            /* NVIDIA sub-allocates small requests; 512 B is its alignment */
            pv->rounded += (size + 511) / 512 * 512;
            pv->small_count++;
            pv->small_bytes += size;
        }
    }
}

long record_live_ranges(int device, struct record_range **out)
{
    *out = NULL;
    record_lock_take(&record_lock);
    const struct addr_table *t = &record_live_table;
    long n = 0, cap = (long)t->count;
    struct record_range *v = cap > 0 ? malloc((size_t)cap * sizeof *v) : NULL;
    if (cap > 0 && v == NULL) {
        record_lock_drop(&record_lock);
        return -1;
    }
    for (uint32_t i = 0; i < table_size(t); i++) {
        const struct live *e = t->slots[i].e;
        if (e == NULL)
            continue;
        const struct site *s = site_of(e);
        if (s->s.pool != (uint32_t)device ||
            !FORMAT_KIND_PLACED(s->s.kind))
            continue;
        v[n++] = (struct record_range){e->addr, entry_size(e),
                                       s->s.stack ? s->s.stack->id : 0, s->s.kind};
    }
    record_lock_drop(&record_lock);
    if (n == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    return n;
}

uint64_t record_activity(void)
{
    uint64_t n = 0;
    record_lock_take(&record_lock);
    for (int p = 0; p < RECORD_POOLS; p++)
        for (int k = 0; k < KIND_COUNT; k++)
            n += record_pools[p].kinds[k].allocs + record_pools[p].kinds[k].frees +
                 record_pools[p].kinds[k].failures;
    n += record_totals.unknown_frees + record_totals.failed_frees;
    record_lock_drop(&record_lock);
    return n;
}

uint64_t record_allocations(void)
{
    uint64_t n = 0;
    record_lock_take(&record_lock);
    for (int p = 0; p < RECORD_POOLS; p++)
        for (int k = 0; k < KIND_COUNT; k++)
            n += record_pools[p].kinds[k].allocs + record_pools[p].kinds[k].failures;
    record_lock_drop(&record_lock);
    return n;
}

static void site_view_fill(const struct site *s, struct record_site_view *sv)
{
    bool saved = s->s.epoch == record_pools[s->s.pool].epoch;
    sv->stack = s->s.stack;
    sv->pool = s->s.pool;
    sv->phase = s->s.phase;
    sv->kind = s->s.kind;
    sv->current = s->s.current;
    sv->count = s->s.count;
    sv->at_peak = saved ? s->s.at_peak : s->s.current;
    sv->at_peak_count = saved ? s->s.at_peak_count : s->s.count;
    saved = s->s.mark_epoch == record_pools[s->s.pool].mark.epoch;
    sv->mark_at_peak = saved ? s->s.mark_at_peak : s->s.current;
    sv->mark_at_peak_count = saved ? s->s.mark_at_peak_count : s->s.count;
    sv->allocs = s->s.allocs;
    sv->frees = s->s.frees;
    sv->alloc_bytes = s->s.alloc_bytes;
    sv->temporary = s->s.temporary;
}

static void site_view_add(struct record_site_view *to, const struct record_site_view *s)
{
    to->current += s->current;
    to->count += s->count;
    to->at_peak += s->at_peak;
    to->at_peak_count += s->at_peak_count;
    to->mark_at_peak += s->mark_at_peak;
    to->mark_at_peak_count += s->mark_at_peak_count;
    to->allocs += s->allocs;
    to->frees += s->frees;
    to->alloc_bytes += s->alloc_bytes;
    to->temporary += s->temporary;
}

/* Copies up to RECORD_ROWS_CHUNK rows (all of them when the log is
 * thinned) from fresh->next on; the lock is held.  False without memory. */
static bool copy_chunk(struct record_rows *fresh, bool thinned)
{
    size_t n = fresh->end - fresh->next;
    if (!thinned && n > RECORD_ROWS_CHUNK)
        n = RECORD_ROWS_CHUNK;
    if (n > fresh->cap) {
        size_t cap = thinned ? n : RECORD_ROWS_CHUNK;
        struct record_event *g = realloc(fresh->rows, cap * sizeof *g);
        if (g == NULL)
            return false;
        fresh->rows = g;
        fresh->cap = cap;
    }
    event_log_copy_range(fresh->rows, fresh->next, n);
    fresh->next += n;
    fresh->nrows = n;
    if (n > 0) {
        /* an unthinned log's k-th row is its (recorded - kept + k)-th event */
        fresh->recorded = fresh->recorded_end - (fresh->end - fresh->next);
        fresh->last_t_ns = fresh->rows[n - 1].t_ns;
    }
    return true;
}

static bool take_fresh_rows(struct record_rows *fresh, const struct event_log_stats *es)
{
    fresh->next = event_log_fresh_from(fresh->recorded, fresh->last_t_ns);
    fresh->end = es->kept > fresh->next ? es->kept : fresh->next;
    fresh->recorded_end = es->recorded;
    fresh->nrows = 0;
    return copy_chunk(fresh, es->bucket_ns != 0);
}

bool record_rows_more(struct record_rows *fresh)
{
    fresh->nrows = 0;
    if (fresh->next >= fresh->end)
        return false;
    record_lock_take(&record_lock);
    bool ok = event_log_stats().bucket_ns == 0 && copy_chunk(fresh, false);
    record_lock_drop(&record_lock);
    if (!ok)
        fresh->next = fresh->end; /* the next view takes up from here */
    return ok && fresh->nrows > 0;
}

int record_view_take_fresh(struct record_view *v, struct record_rows *fresh)
{
    memset(v, 0, sizeof *v);
    record_lock_take(&record_lock);
    struct event_log_stats es = event_log_stats();
    v->sites = malloc((record_nsites ? record_nsites : 1) * sizeof *v->sites);
    v->stacks = malloc((record_nstacks ? record_nstacks : 1) * sizeof *v->stacks);
    if (fresh == NULL)
        v->events = malloc((es.kept ? es.kept : 1) * sizeof *v->events);
    if (!v->sites || !v->stacks || (fresh == NULL && !v->events) ||
        (fresh != NULL && !take_fresh_rows(fresh, &es)))
        goto fail;
    for (int i = 0; i < RECORD_POOLS; i++) {
        struct pool *p = &record_pools[i];
        struct record_pool_view *pv = &v->pools[i];
        pv->active = p->active;
        pv->current = p->current;
        pv->peak = p->peak;
        pv->peak_time = p->peak_time;
        pv->peak_phase = p->peak_phase;
        pv->limit = record_limits[i].limit;
        pv->free_bytes = p->free_bytes;
        pv->total_bytes = p->total_bytes;
        memcpy(pv->kinds, p->kinds, sizeof pv->kinds);
        pv->vmm = p->vmm;
        pv->mark = p->mark;
    }
    /* Every site hangs off its stack; without memory for pool_of the
     * histogram reads each entry's site instead. */
    _Static_assert(RECORD_POOLS <= 256, "pool_of holds a pool in a byte");
    uint8_t *pool_of = malloc(record_nsites ? record_nsites : 1);
    bool any_phase = false;
    for (size_t i = 0; i < record_nstacks && !any_phase; i++)
        any_phase = record_stacks_by_id[i]->phased != NULL;
    if (any_phase && (v->phased = malloc(record_nsites * sizeof *v->phased)) == NULL) {
        free(pool_of);
        goto fail;
    }
    size_t seen = 0;
    for (size_t i = 0; i < record_nstacks; i++) {
        v->stacks[i] = &record_stacks_by_id[i]->s;
        size_t first = v->nsites;
        for (struct site *s = record_stacks_by_id[i]->sites; s; s = s->next, seen++) {
            struct record_site_view *sv = &v->sites[v->nsites++];
            if (pool_of != NULL)
                pool_of[s->index] = (uint8_t)s->s.pool;
            site_view_fill(s, sv);
            if (v->phased != NULL)
                v->phased[v->nphased++] = *sv;
        }
        /* a phase's site adds into its stack's (pool, kind) group */
        for (struct site *s = record_stacks_by_id[i]->phased; s; s = s->next, seen++) {
            struct record_site_view *pv = &v->phased[v->nphased++];
            if (pool_of != NULL)
                pool_of[s->index] = (uint8_t)s->s.pool;
            site_view_fill(s, pv);
            size_t j = first;
            while (j < v->nsites && (v->sites[j].pool != pv->pool || v->sites[j].kind != pv->kind))
                j++;
            if (j == v->nsites) {
                v->sites[v->nsites++] = *pv;
                v->sites[j].phase = 0;
            } else {
                site_view_add(&v->sites[j], pv);
            }
        }
    }
    if (pool_of != NULL && seen != record_nsites) {
        free(pool_of); /* a site no stack lists: read the sites themselves */
        pool_of = NULL;
    }
    uint64_t live = record_handles.count + record_live_table.count;
    histogram_locked(v, &record_live_table, pool_of);
    histogram_locked(v, &record_handles, pool_of);
    free(pool_of);
    v->nstacks = record_nstacks;
    if (fresh == NULL)
        event_log_copy(v->events, 0);
    v->nevents = es.kept;
    v->events_recorded = es.recorded;
    v->event_bucket_ns = es.bucket_ns;
    v->event_cap = es.cap;
    v->mark_depth = record_mark_depth;
    v->counters = record_totals;
    v->counters.live = live;
    v->counters.reentrant_untracked =
        __atomic_load_n(&record_reentrant, __ATOMIC_RELAXED);
    record_lock_drop(&record_lock);
    return 0;
fail:
    record_lock_drop(&record_lock);
    record_view_free(v);
    return -1;
}

int record_view_take(struct record_view *v)
{
    return record_view_take_fresh(v, NULL);
}

void record_view_free(struct record_view *v)
{
    free(v->sites);
    free(v->phased);
    free(v->stacks);
    free(v->events);
    memset(v, 0, sizeof *v);
}
