/* record.c - the tracker's live recording path: live allocations keyed by
 * address, the deduplicated stack table, per-pool counters and exact peak
 * attribution.  Its siblings: record_vmm.c (VMM ranges, the limit),
 * record_view.c (marks, queries, the copy a dump takes); the state they
 * share is in record_state.h.
 *
 * Workload: one insert per allocation, one lookup+delete per free, one stack
 * intern per allocation (a hash lookup once the stack is known); dumps are
 * rare.  Everything here runs inside the host process, on its allocation
 * path: no syscalls, and after warm-up no malloc except when a new stack or a
 * new slab of entries is needed.
 *
 * Pools: a pool is one device ordinal (0..63) or host-pinned memory.  A
 * device pool's `current` is device + managed + async + vmm bytes.
 *
 * Peak attribution in O(1) (DESIGN.md): each pool has an `epoch` that a new
 * peak increments.  Before a site's `current` changes, if its epoch is older
 * than the pool's, its `current` is what it held at the latest peak, so it is
 * saved into `at_peak` and the epoch refreshed.  At dump time a site whose
 * epoch is still older was untouched since the peak: at_peak = current.
 * Invariant (asserted in tests): the sites' at_peak of a pool sum to its peak.
 * The peak since a mark (record_mark_set) is a second such peak per pool,
 * with its own epoch and per-site fields, kept by the same few instructions.
 *
 * Threads: one mutex (record_lock) guards every table and counter.  Stack capture (the
 * expensive part) happens before the lock is taken; stacks are immutable once
 * published, so dumps read their frames without the lock.
 *
 * Limitations: a stream-ordered free is accounted when it is issued, not when
 * the stream reaches it; managed memory is assumed resident on its device.
 */
#include "record_state.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "event_log.h"

/* ---- the state record_state.h declares ---- */

/* Adaptive: critical sections are a few hash operations long, so a
 * contending thread spins briefly instead of sleeping in the kernel. */
pthread_mutex_t record_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
bool record_nomem;
struct site **record_site_table;
uint32_t record_nsites;
static uint32_t sites_cap;
const struct live *record_last_alloc, *record_last_temporary;
struct pool record_pools[RECORD_POOLS];
struct live *record_live_table, *record_handles;
static struct live *free_entries;
static struct stack_node *stack_table;
struct stack_node **record_stacks_by_id;
size_t record_nstacks;
static size_t stacks_cap;
struct record_counters record_totals;
uint64_t record_reentrant;

/* Owners: 0 none known (never dropped), 1 + d the primary context of
 * device d, OWNER_CREATED + n created context n. */
#define OWNER_CREATED (1 + RECORD_MAX_DEVICES - 1)
_Static_assert(OWNER_CREATED + RECORD_MAX_CONTEXTS < 1024, "owner is 10 bits");

static unsigned owner_of(int device, unsigned ctx)
{
    if (ctx != 0)
        return ctx <= RECORD_MAX_CONTEXTS ? OWNER_CREATED + ctx : 0;
    return device >= 0 && device < RECORD_MAX_DEVICES ? 1u + (unsigned)device : 0;
}

/* Entries come from slabs: no malloc per allocation after warm-up. */
#define SLAB_ENTRIES 1024
struct slab {
    struct slab *next;
    struct live e[SLAB_ENTRIES];
};
static struct slab *slabs;

static __thread uint32_t tid_cache __attribute__((tls_model("initial-exec")));

static uint32_t current_tid(void)
{
    if (tid_cache == 0)
        tid_cache = (uint32_t)syscall(SYS_gettid);
    return tid_cache;
}
const char *record_kind_name(enum record_kind kind)
{
    static const char *const names[KIND_COUNT] = {
        "device", "managed", "async", "vmm", "host_pinned"};
    return (unsigned)kind < KIND_COUNT ? names[kind] : "unknown";
}

void record_init(size_t cap, int64_t (*clock)(void))
{
    pthread_mutex_lock(&record_lock);
    event_log_init(cap, clock);
    for (int i = 0; i < RECORD_POOLS; i++) {
        record_pools[i].free_bytes = -1;
        record_pools[i].total_bytes = -1;
    }
    pthread_mutex_unlock(&record_lock);
}

/* ---- stacks ---- */

/* Four independent lanes: a single multiply chain over 32 frames is bound
 * by multiply latency (~60 ns); four chains overlap in the pipeline.  The
 * lanes are scalars and the loop is unrolled by hand: as an array in a
 * nested loop they cost ~15 instructions a frame, now ~5. */
#define STACK_MIX(h, f) (h ^= (uint64_t)(uintptr_t)(f), h *= k, h ^= h >> 29)
static uint64_t stack_hash(unsigned entry, void *const *frames, unsigned depth)
{
    const uint64_t k = 0xff51afd7ed558ccdULL;
    uint64_t h0 = 0x9E3779B97F4A7C15ULL * (entry + 1), h1 = 0xC2B2AE3D27D4EB4FULL,
             h2 = 0x165667B19E3779F9ULL, h3 = 0x27D4EB2F165667C5ULL ^ depth;
    unsigned i = 0;
    for (; i + 4 <= depth; i += 4) {
        STACK_MIX(h0, frames[i]);
        STACK_MIX(h1, frames[i + 1]);
        STACK_MIX(h2, frames[i + 2]);
        STACK_MIX(h3, frames[i + 3]);
    }
    if (i < depth)
        STACK_MIX(h0, frames[i]);
    if (i + 1 < depth)
        STACK_MIX(h1, frames[i + 1]);
    if (i + 2 < depth)
        STACK_MIX(h2, frames[i + 2]);
    uint64_t x = h0 ^ (h1 * k) ^ (h2 * (k + 2)) ^ (h3 * (k + 4));
    return x ^ (x >> 31);
}
#undef STACK_MIX

static bool stack_equal(const struct record_stack *s, unsigned entry,
                        void *const *frames, unsigned depth)
{
    return s->entry == entry && s->depth == depth &&
           memcmp(s->frames, frames, depth * sizeof(void *)) == 0;
}

/* Finds or creates the stack; the caller holds the lock.  NULL only when
 * memory is exhausted. */
static struct record_stack *intern_locked(uint64_t h, unsigned entry,
                                          void *const *frames, unsigned depth)
{
    struct stack_node *n, *head;
    HASH_FIND(hh, stack_table, &h, sizeof h, head);
    for (n = head; n != NULL; n = n->collide)
        if (stack_equal(&n->s, entry, frames, depth))
            return &n->s;

    if (record_nstacks == stacks_cap) {
        size_t cap = stacks_cap ? stacks_cap * 2 : 1024;
        struct stack_node **p = realloc(record_stacks_by_id, cap * sizeof *p);
        if (p == NULL)
            return NULL;
        record_stacks_by_id = p;
        stacks_cap = cap;
    }
    n = malloc(sizeof *n + depth * sizeof(void *));
    if (n == NULL)
        return NULL;
    memset(n, 0, sizeof *n);
    n->hash = h;
    n->s.id = (uint32_t)record_nstacks + 1;
    n->s.depth = (uint16_t)depth;
    n->s.entry = (uint16_t)entry;
    memcpy(n->s.frames, frames, depth * sizeof(void *));
    if (head != NULL) {
        n->collide = head->collide;
        head->collide = n;
    } else {
        HASH_ADD(hh, stack_table, hash, sizeof n->hash, n);
        if (record_nomem) {
            record_nomem = false;
            free(n);
            return NULL;
        }
    }
    record_stacks_by_id[record_nstacks++] = n;
    record_totals.stacks = record_nstacks;
    return &n->s;
}

struct record_stack *record_stack_intern(unsigned entry, void *const *frames,
                                         unsigned depth)
{
    if (depth > RECORD_MAX_DEPTH)
        depth = RECORD_MAX_DEPTH;
    uint64_t h = stack_hash(entry, frames, depth); /* outside the record_lock */
    pthread_mutex_lock(&record_lock);
    struct record_stack *st = intern_locked(h, entry, frames, depth);
    pthread_mutex_unlock(&record_lock);
    return st;
}

static struct stack_node *node_of(struct record_stack *s)
{
    return (struct stack_node *)((char *)s - offsetof(struct stack_node, s));
}

/* The shared stack of allocations whose stack could not be stored. */
static struct stack_node unknown;

static struct record_stack *unknown_stack_locked(void)
{
    if (unknown.s.id == 0) {
        if (record_nstacks == stacks_cap) {
            size_t cap = stacks_cap ? stacks_cap * 2 : 1024;
            struct stack_node **p = realloc(record_stacks_by_id, cap * sizeof *p);
            if (p == NULL)
                return NULL;
            record_stacks_by_id = p;
            stacks_cap = cap;
        }
        unknown.s.id = (uint32_t)record_nstacks + 1;
        unknown.s.entry = 0xffff;
        record_stacks_by_id[record_nstacks++] = &unknown;
        record_totals.stacks = record_nstacks;
    }
    return &unknown.s;
}

static struct site *site_get_locked(struct record_stack *stack, uint32_t pool,
                                    enum record_kind kind)
{
    if (stack == NULL && (stack = unknown_stack_locked()) == NULL)
        return NULL;
    struct stack_node *n = node_of(stack);
    for (struct site *s = n->sites; s != NULL; s = s->next)
        if (s->s.pool == pool && s->s.kind == kind)
            return s;
    if (record_nsites == sites_cap) {
        uint32_t cap = sites_cap ? sites_cap * 2 : 1024;
        struct site **t = cap < sites_cap || cap >= HANDLE_BIT
                              ? NULL : realloc(record_site_table, cap * sizeof *t);
        if (t == NULL)
            return NULL;
        record_site_table = t;
        sites_cap = cap;
    }
    struct site *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->index = record_nsites;
    record_site_table[record_nsites++] = s;
    s->s.stack = stack;
    s->s.pool = pool;
    s->s.kind = (uint8_t)kind;
    s->next = n->sites;
    n->sites = s;
    return s;
}

/* ---- entries ---- */

static struct live *entry_new_locked(void)
{
    if (free_entries == NULL) {
        struct slab *sl = malloc(sizeof *sl);
        if (sl == NULL)
            return NULL;
        sl->next = slabs;
        slabs = sl;
        for (int i = SLAB_ENTRIES - 1; i >= 0; i--) {
            sl->e[i].addr = (uintptr_t)free_entries;
            free_entries = &sl->e[i];
        }
    }
    struct live *e = free_entries;
    free_entries = (struct live *)e->addr;
    memset(e, 0, sizeof *e);
    return e;
}

void record_entry_free_locked(struct live *e)
{
    e->addr = (uintptr_t)free_entries;
    free_entries = e;
}

/* ---- counters ---- */

static void event_push_locked(int64_t now, int64_t delta, const struct site *s,
                              const struct pool *p)
{
    struct record_event ev = {
        .t_ns = now,
        .delta = delta,
        .current = p->current,
        .stack = s->s.stack ? s->s.stack->id : 0,
        .pool = s->s.pool == RECORD_HOST_POOL ? -1 : (int16_t)s->s.pool,
        .kind = s->s.kind,
    };
    event_log_push(&ev);
}

/* Applies +/- bytes of one allocation to its site and pool.  The site is
 * updated first and the pool's epoch bumped after, so a site that sets a new
 * peak counts as "untouched since the peak" - its current is its at_peak. */
void record_account_locked(struct site *s, int64_t bytes, int64_t now)
{
    struct pool *p = &record_pools[s->s.pool];
    struct record_kind_stats *k = &p->kinds[s->s.kind];

    now = event_log_stamp(now); /* under the record_lock: events stay in time order */
    if (s->s.epoch != p->epoch) {
        s->s.at_peak = s->s.current;
        s->s.at_peak_count = s->s.count;
        s->s.epoch = p->epoch;
    }
    if (s->s.mark_epoch != p->mark.epoch) {
        s->s.mark_at_peak = s->s.current;
        s->s.mark_at_peak_count = s->s.count;
        s->s.mark_epoch = p->mark.epoch;
    }
    s->s.current += (uint64_t)bytes;
    s->s.count += bytes >= 0 ? 1 : (uint64_t)-1;
    if (bytes >= 0) {
        s->s.allocs++;
        s->s.alloc_bytes += (uint64_t)bytes;
    } else {
        s->s.frees++;
    }
    p->current += (uint64_t)bytes;
    k->current += (uint64_t)bytes;
    p->active = true;
    if (bytes >= 0) {
        k->allocs++;
        if (k->current > k->peak) {
            k->peak = k->current;
            k->peak_time = now;
        }
        if (p->current > p->peak) {
            p->peak = p->current;
            p->peak_time = now;
            p->epoch++;
        }
        if (p->current > p->mark.peak) {
            p->mark.peak = p->current;
            p->mark.peak_time = now;
            p->mark.epoch++;
            p->mark.sites_valid = true;
        }
    } else {
        k->frees++;
    }
    event_push_locked(now, bytes, s, p);
}

/* Entries freed by this thread wait here for its next allocation, so the
 * free path needs no second trip through the lock (see record_free_finish). */
static __thread struct live *spare __attribute__((tls_model("initial-exec")));

static void alloc_locked(const struct record_alloc *a, struct record_stack *stack,
                         int64_t now, uint32_t tid, struct live *e)
{
    uint32_t pool = record_pool_of(a->kind, a->device);
    struct site *s = site_get_locked(stack, pool, a->kind);
    if (s == NULL) {
        if (e != NULL)
            record_entry_free_locked(e);
        return;
    }
    if (e == NULL && (e = entry_new_locked()) == NULL)
        return;
    memset(e, 0, sizeof *e);
    e->addr = a->addr;
    e->size_extra = a->size & SIZE_MASK;
    e->t_ns = now;
    e->site = s->index;
    e->tid = tid & ((1u << 22) - 1);
    e->owner = owner_of(a->device, a->ctx) & 1023u;
    set_extra(e, a->requested >= a->size ? 0 : a->size - a->requested);
    if (a->is_handle) {
        /* cuMemCreate handle (device- or host-located): refcounted. */
        struct live *old;
        e->site |= HANDLE_BIT;
        set_extra(e, 1);
        HASH_FIND(hh, record_handles, &e->addr, sizeof e->addr, old);
        if (old != NULL) /* driver reused a handle we missed the release of */
            HASH_DELETE(hh, record_handles, old);
        HASH_ADD(hh, record_handles, addr, sizeof e->addr, e);
    } else {
        struct live *old;
        HASH_FIND(hh, record_live_table, &e->addr, sizeof e->addr, old);
        if (old != NULL) {
            /* Freed behind our back (e.g. by a context reset): drop it. */
            HASH_DELETE(hh, record_live_table, old);
            record_account_locked(site_of(old), -(int64_t)entry_size(old), now);
            record_totals.live--;
            record_entry_free_locked(old);
        }
        HASH_ADD(hh, record_live_table, addr, sizeof e->addr, e);
    }
    if (record_nomem) {
        record_nomem = false;
        record_entry_free_locked(e);
        return;
    }
    record_totals.live++;
    record_account_locked(s, (int64_t)a->size, now);
    record_last_alloc = e;
}

void record_alloc(const struct record_alloc *a, struct record_stack *stack,
                  int64_t now)
{
    uint32_t tid = current_tid();
    struct live *e = spare;
    spare = NULL;
    pthread_mutex_lock(&record_lock);
    alloc_locked(a, stack, now, tid, e);
    pthread_mutex_unlock(&record_lock);
}

void record_alloc_at(const struct record_alloc *a, unsigned entry,
                     void *const *frames, unsigned depth, int64_t now)
{
    if (depth > RECORD_MAX_DEPTH)
        depth = RECORD_MAX_DEPTH;
    uint64_t h = stack_hash(entry, frames, depth); /* outside the record_lock */
    uint32_t tid = current_tid();
    struct live *e = spare;
    spare = NULL;
    pthread_mutex_lock(&record_lock);
    struct record_stack *st = intern_locked(h, entry, frames, depth);
    alloc_locked(a, st, now, tid, e);
    pthread_mutex_unlock(&record_lock);
}

static bool kind_matches(enum record_kind have, enum record_kind want)
{
    if (want == KIND_COUNT)
        return true;
    if (want == KIND_HOST_PINNED)
        return have == KIND_HOST_PINNED;
    return have != KIND_HOST_PINNED;
}

void *record_free_take(uintptr_t addr, enum record_kind kind_hint,
                       int64_t now)
{
    struct live *e;
    pthread_mutex_lock(&record_lock);
    HASH_FIND(hh, record_live_table, &addr, sizeof addr, e);
    if (e != NULL && !kind_matches(site_of(e)->s.kind, kind_hint)) {
        /* Known, but not to this API: the real call refuses it and the
         * allocation stays live - a bug in the caller, not a stranger. */
        record_totals.wrong_kind_frees++;
        pthread_mutex_unlock(&record_lock);
        return NULL;
    }
    if (e != NULL) {
        HASH_DELETE(hh, record_live_table, e);
        record_account_locked(site_of(e), -(int64_t)entry_size(e), now);
        record_totals.live--;
        record_last_temporary = NULL;
        if (e == record_last_alloc) { /* nothing was allocated since: temporary */
            site_of(e)->s.temporary++;
            record_last_temporary = e;
        }
        record_last_alloc = NULL;
    } else {
        record_totals.unknown_frees++;
    }
    pthread_mutex_unlock(&record_lock);
    return e;
}

void record_free_finish(void *token, bool ok, int64_t now)
{
    struct live *e = token;
    if (e == NULL)
        return;
    if (ok) {
        if (spare == NULL) { /* the common case: no record_lock */
            spare = e;
            return;
        }
        pthread_mutex_lock(&record_lock);
        record_entry_free_locked(e);
        pthread_mutex_unlock(&record_lock);
        return;
    }
    /* The real free failed: the memory is still there, put it back.  The
     * counters return to where they were (this is not a new allocation). */
    pthread_mutex_lock(&record_lock);
    struct site *s = site_of(e);
    record_totals.failed_frees++;
    if (is_handle(e)) {
        set_extra(e, 1);
        HASH_ADD(hh, record_handles, addr, sizeof e->addr, e);
    } else {
        HASH_ADD(hh, record_live_table, addr, sizeof e->addr, e);
    }
    if (record_nomem) { /* cannot put it back: forget it rather than lie */
        record_nomem = false;
        record_entry_free_locked(e);
    } else {
        record_account_locked(s, (int64_t)entry_size(e), now);
        record_pools[s->s.pool].kinds[s->s.kind].allocs--;
        record_pools[s->s.pool].kinds[s->s.kind].frees--;
        s->s.allocs--;
        s->s.frees--;
        s->s.alloc_bytes -= entry_size(e);
        if (e == record_last_temporary) {
            s->s.temporary--;
            record_last_temporary = NULL;
        }
        record_totals.live++;
    }
    pthread_mutex_unlock(&record_lock);
}

void record_count_reentrant(void)
{
    __atomic_fetch_add(&record_reentrant, 1, __ATOMIC_RELAXED);
}

void record_thread_end(void)
{
    struct live *e = spare;
    spare = NULL;
    if (e != NULL) {
        pthread_mutex_lock(&record_lock);
        record_entry_free_locked(e);
        pthread_mutex_unlock(&record_lock);
    }
}

uint64_t record_token_size(const void *token)
{
    return token ? entry_size(token) : 0;
}

uint32_t record_token_stack(const void *token)
{
    const struct record_stack *st = token ? site_of(token)->s.stack : NULL;
    return st ? st->id : 0;
}

uint64_t record_drop_context(int device, unsigned ctx, int64_t now)
{
    unsigned owner = owner_of(device, ctx);
    uint64_t bytes = 0;
    struct live *e, *tmp;
    if (owner == 0)
        return 0;
    pthread_mutex_lock(&record_lock);
    HASH_ITER(hh, record_live_table, e, tmp) {
        struct site *s = site_of(e);
        if (e->owner != owner || s->s.kind == KIND_ASYNC || s->s.kind == KIND_VMM)
            continue;
        HASH_DELETE(hh, record_live_table, e);
        record_account_locked(s, -(int64_t)entry_size(e), now);
        record_totals.live--;
        bytes += entry_size(e);
        record_entry_free_locked(e);
    }
    pthread_mutex_unlock(&record_lock);
    return bytes;
}

void record_failure(enum record_kind kind, int device)
{
    pthread_mutex_lock(&record_lock);
    struct pool *p = &record_pools[record_pool_of(kind, device)];
    p->kinds[kind].failures++;
    p->active = true;
    pthread_mutex_unlock(&record_lock);
}

/* ---- fork ---- */

void record_atfork_prepare(void)
{
    pthread_mutex_lock(&record_lock);
}

void record_atfork_parent(void)
{
    pthread_mutex_unlock(&record_lock);
}

void record_atfork_child(void)
{
    /* Only the forking thread survives, and it holds the lock: tear every
     * table down so the child starts empty, keeping the configuration. */
    HASH_CLEAR(hh, record_live_table);
    HASH_CLEAR(hh, record_handles);
    record_vmm_reset_locked();
    while (slabs != NULL) {
        struct slab *next = slabs->next;
        free(slabs);
        slabs = next;
    }
    free_entries = NULL;
    HASH_CLEAR(hh, stack_table);
    for (size_t i = 0; i < record_nstacks; i++) {
        struct stack_node *n = record_stacks_by_id[i];
        while (n->sites != NULL) {
            struct site *next = n->sites->next;
            free(n->sites);
            n->sites = next;
        }
        if (n != &unknown)
            free(n);
    }
    unknown.s.id = 0;
    free(record_site_table);
    record_site_table = NULL;
    record_nsites = sites_cap = 0;
    free(record_stacks_by_id);
    record_stacks_by_id = NULL;
    record_nstacks = stacks_cap = 0;
    event_log_reset();
    memset(&record_totals, 0, sizeof record_totals);
    __atomic_store_n(&record_reentrant, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < RECORD_POOLS; i++) {
        uint64_t limit = record_pools[i].limit;
        memset(&record_pools[i], 0, sizeof record_pools[i]);
        record_pools[i].limit = limit;
        record_pools[i].free_bytes = record_pools[i].total_bytes = -1;
    }
    tid_cache = 0;
    spare = NULL; /* it pointed into a slab just freed */
    pthread_mutex_unlock(&record_lock);
}
