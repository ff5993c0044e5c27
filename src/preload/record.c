/* record.c - live allocations keyed by address, the deduplicated stack
 * table, per-pool counters and exact peak attribution.
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
 * Threads: one mutex guards every table and counter.  Stack capture (the
 * expensive part) happens before the lock is taken; stacks are immutable once
 * published, so dumps read their frames without the lock.
 *
 * Limitations: a stream-ordered free is accounted when it is issued, not when
 * the stream reaches it; managed memory is assumed resident on its device.
 */
#include "record.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "event_log.h"

static bool nomem; /* set by uthash when an insert could not allocate */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (nomem = true)
#define HASH_FUNCTION(keyptr, keylen, hashv) \
    ((hashv) = hash_key((const void *)(keyptr), (keylen)))

static inline unsigned hash_key(const void *key, size_t len)
{
    /* Keys are addresses, handles or precomputed 64-bit stack hashes.
     * uthash picks a bucket from the hash's LOW bits, and stops doubling
     * its table for good once an expansion leaves most items in overfull
     * buckets, so every input bit must reach every low output bit: the
     * full MurmurHash3 finalizer does that (one multiply and shift left
     * the low bits of 1-16 KiB strided addresses nearly constant, the
     * table stuck at 128 buckets and every lookup walking a long chain).
     * Still far cheaper than uthash's Jenkins. */
    uint64_t x = 0;
    memcpy(&x, key, len < sizeof x ? len : sizeof x);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (unsigned)x;
}

#include <uthash.h>

/* ---- structures ---- */

struct site {
    struct record_site s;
    struct site *next; /* the stack's other sites (other pools) */
    uint32_t index;    /* in site_table */
};

struct stack_node {
    uint64_t hash;
    UT_hash_handle hh;
    struct stack_node *collide; /* different stacks with an equal hash */
    struct site *sites;
    struct record_stack s; /* last: flexible frames[] */
};

/* 88 bytes with uthash's handle (issue 7 asks for at most 96): the size
 * and a 16-bit extra share a word (sizes stay below 2^48 = 256 TiB), the
 * site is a 32-bit index whose top bit marks a VMM handle. */
struct live {
    uintptr_t addr;      /* key; the next free entry while on the free list */
    uint64_t size_extra; /* bytes charged | extra << 48; extra: a handle's
                            references, else size - requested (saturating) */
    int64_t t_ns;
    uint32_t site;       /* index into site_table | HANDLE_BIT */
    /* Linux tids are below PID_MAX_LIMIT = 2^22: the other 10 bits name the
     * owning context (owner_of), so a context's destroy can find its memory. */
    uint32_t tid : 22;
    uint32_t owner : 10;
    UT_hash_handle hh;
};
_Static_assert(sizeof(struct live) <= 88, "live entry over budget");

#define HANDLE_BIT 0x80000000u
#define SIZE_MASK ((UINT64_C(1) << 48) - 1)
#define EXTRA_MAX 0xffffu

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

static struct site **site_table; /* every site, by index */
static uint32_t nsites, sites_cap;

static inline struct site *site_of(const struct live *e)
{
    return site_table[e->site & ~HANDLE_BIT];
}

static inline bool is_handle(const struct live *e)
{
    return (e->site & HANDLE_BIT) != 0;
}

static inline uint64_t entry_size(const struct live *e)
{
    return e->size_extra & SIZE_MASK;
}

static inline unsigned entry_extra(const struct live *e)
{
    return (unsigned)(e->size_extra >> 48);
}

static inline void set_extra(struct live *e, uint64_t extra)
{
    if (extra > EXTRA_MAX)
        extra = EXTRA_MAX;
    e->size_extra = (e->size_extra & SIZE_MASK) | extra << 48;
}

/* A range of virtual addresses: reserved (cuMemAddressReserve) or mapped
 * to a handle (cuMemMap). */
struct range {
    uintptr_t addr;
    uint64_t size;
    uint32_t pool;
    UT_hash_handle hh;
};

struct pool {
    bool active;
    uint64_t current, peak, epoch;
    int64_t peak_time;
    uint64_t limit, inflight;
    int64_t free_bytes, total_bytes;
    struct record_kind_stats kinds[KIND_COUNT];
    struct record_vmm_stats vmm;
    struct record_mark mark;
};

/* Adaptive: critical sections are a few hash operations long, so a
 * contending thread spins briefly instead of sleeping in the kernel. */
static pthread_mutex_t lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
/* The latest allocation, while nothing else was allocated since, and the
 * latest free counted as temporary (a failed free takes it back). */
static const struct live *last_alloc, *last_temporary;
static struct pool pools[RECORD_POOLS];
static struct live *live_table, *handles, *free_entries;
static struct range *mappings, *reservations;
static struct stack_node *stack_table, **stacks_by_id;
static size_t nstacks, stacks_cap;
static struct record_counters counters;

/* Entries come from slabs: no malloc per allocation after warm-up. */
#define SLAB_ENTRIES 1024
struct slab {
    struct slab *next;
    struct live e[SLAB_ENTRIES];
};
static struct slab *slabs;

static __thread uint32_t tid_cache __attribute__((tls_model("initial-exec")));

#include <sys/syscall.h>
#include <unistd.h>

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

static uint32_t pool_of(enum record_kind kind, int device)
{
    if (kind == KIND_HOST_PINNED)
        return RECORD_HOST_POOL;
    if (device < 0)
        return 0;
    if (device >= RECORD_MAX_DEVICES)
        return RECORD_MAX_DEVICES - 1;
    return (uint32_t)device;
}

void record_init(size_t cap, int64_t (*clock)(void))
{
    pthread_mutex_lock(&lock);
    event_log_init(cap, clock);
    for (int i = 0; i < RECORD_POOLS; i++) {
        pools[i].free_bytes = -1;
        pools[i].total_bytes = -1;
    }
    pthread_mutex_unlock(&lock);
}

/* ---- stacks ---- */

/* Four independent lanes: a single multiply chain over 32 frames is bound
 * by multiply latency (~60 ns); four chains overlap in the pipeline. */
static uint64_t stack_hash(unsigned entry, void *const *frames, unsigned depth)
{
    const uint64_t k = 0xff51afd7ed558ccdULL;
    uint64_t h[4] = {0x9E3779B97F4A7C15ULL * (entry + 1), 0xC2B2AE3D27D4EB4FULL,
                     0x165667B19E3779F9ULL, 0x27D4EB2F165667C5ULL ^ depth};
    unsigned i = 0;
    for (; i + 4 <= depth; i += 4)
        for (unsigned l = 0; l < 4; l++) {
            h[l] ^= (uint64_t)(uintptr_t)frames[i + l];
            h[l] *= k;
            h[l] ^= h[l] >> 29;
        }
    for (unsigned l = 0; i < depth; i++, l++) {
        h[l] ^= (uint64_t)(uintptr_t)frames[i];
        h[l] *= k;
        h[l] ^= h[l] >> 29;
    }
    uint64_t x = h[0] ^ (h[1] * k) ^ (h[2] * (k + 2)) ^ (h[3] * (k + 4));
    return x ^ (x >> 31);
}

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

    if (nstacks == stacks_cap) {
        size_t cap = stacks_cap ? stacks_cap * 2 : 1024;
        struct stack_node **p = realloc(stacks_by_id, cap * sizeof *p);
        if (p == NULL)
            return NULL;
        stacks_by_id = p;
        stacks_cap = cap;
    }
    n = malloc(sizeof *n + depth * sizeof(void *));
    if (n == NULL)
        return NULL;
    memset(n, 0, sizeof *n);
    n->hash = h;
    n->s.id = (uint32_t)nstacks + 1;
    n->s.depth = (uint16_t)depth;
    n->s.entry = (uint16_t)entry;
    memcpy(n->s.frames, frames, depth * sizeof(void *));
    if (head != NULL) {
        n->collide = head->collide;
        head->collide = n;
    } else {
        HASH_ADD(hh, stack_table, hash, sizeof n->hash, n);
        if (nomem) {
            nomem = false;
            free(n);
            return NULL;
        }
    }
    stacks_by_id[nstacks++] = n;
    counters.stacks = nstacks;
    return &n->s;
}

struct record_stack *record_stack_intern(unsigned entry, void *const *frames,
                                         unsigned depth)
{
    if (depth > RECORD_MAX_DEPTH)
        depth = RECORD_MAX_DEPTH;
    uint64_t h = stack_hash(entry, frames, depth); /* outside the lock */
    pthread_mutex_lock(&lock);
    struct record_stack *st = intern_locked(h, entry, frames, depth);
    pthread_mutex_unlock(&lock);
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
        if (nstacks == stacks_cap) {
            size_t cap = stacks_cap ? stacks_cap * 2 : 1024;
            struct stack_node **p = realloc(stacks_by_id, cap * sizeof *p);
            if (p == NULL)
                return NULL;
            stacks_by_id = p;
            stacks_cap = cap;
        }
        unknown.s.id = (uint32_t)nstacks + 1;
        unknown.s.entry = 0xffff;
        stacks_by_id[nstacks++] = &unknown;
        counters.stacks = nstacks;
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
    if (nsites == sites_cap) {
        uint32_t cap = sites_cap ? sites_cap * 2 : 1024;
        struct site **t = cap < sites_cap || cap >= HANDLE_BIT
                              ? NULL : realloc(site_table, cap * sizeof *t);
        if (t == NULL)
            return NULL;
        site_table = t;
        sites_cap = cap;
    }
    struct site *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->index = nsites;
    site_table[nsites++] = s;
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

static void entry_free_locked(struct live *e)
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
static void account_locked(struct site *s, int64_t bytes, int64_t now)
{
    struct pool *p = &pools[s->s.pool];
    struct record_kind_stats *k = &p->kinds[s->s.kind];

    now = event_log_stamp(now); /* under the lock: events stay in time order */
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
    uint32_t pool = pool_of(a->kind, a->device);
    struct site *s = site_get_locked(stack, pool, a->kind);
    if (s == NULL) {
        if (e != NULL)
            entry_free_locked(e);
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
        HASH_FIND(hh, handles, &e->addr, sizeof e->addr, old);
        if (old != NULL) /* driver reused a handle we missed the release of */
            HASH_DELETE(hh, handles, old);
        HASH_ADD(hh, handles, addr, sizeof e->addr, e);
    } else {
        struct live *old;
        HASH_FIND(hh, live_table, &e->addr, sizeof e->addr, old);
        if (old != NULL) {
            /* Freed behind our back (e.g. by a context reset): drop it. */
            HASH_DELETE(hh, live_table, old);
            account_locked(site_of(old), -(int64_t)entry_size(old), now);
            counters.live--;
            entry_free_locked(old);
        }
        HASH_ADD(hh, live_table, addr, sizeof e->addr, e);
    }
    if (nomem) {
        nomem = false;
        entry_free_locked(e);
        return;
    }
    counters.live++;
    account_locked(s, (int64_t)a->size, now);
    last_alloc = e;
}

void record_alloc(const struct record_alloc *a, struct record_stack *stack,
                  int64_t now)
{
    uint32_t tid = current_tid();
    struct live *e = spare;
    spare = NULL;
    pthread_mutex_lock(&lock);
    alloc_locked(a, stack, now, tid, e);
    pthread_mutex_unlock(&lock);
}

void record_alloc_at(const struct record_alloc *a, unsigned entry,
                     void *const *frames, unsigned depth, int64_t now)
{
    if (depth > RECORD_MAX_DEPTH)
        depth = RECORD_MAX_DEPTH;
    uint64_t h = stack_hash(entry, frames, depth); /* outside the lock */
    uint32_t tid = current_tid();
    struct live *e = spare;
    spare = NULL;
    pthread_mutex_lock(&lock);
    struct record_stack *st = intern_locked(h, entry, frames, depth);
    alloc_locked(a, st, now, tid, e);
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, live_table, &addr, sizeof addr, e);
    if (e != NULL && !kind_matches(site_of(e)->s.kind, kind_hint)) {
        /* Known, but not to this API: the real call refuses it and the
         * allocation stays live - a bug in the caller, not a stranger. */
        counters.wrong_kind_frees++;
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    if (e != NULL) {
        HASH_DELETE(hh, live_table, e);
        account_locked(site_of(e), -(int64_t)entry_size(e), now);
        counters.live--;
        last_temporary = NULL;
        if (e == last_alloc) { /* nothing was allocated since: temporary */
            site_of(e)->s.temporary++;
            last_temporary = e;
        }
        last_alloc = NULL;
    } else {
        counters.unknown_frees++;
    }
    pthread_mutex_unlock(&lock);
    return e;
}

void record_free_finish(void *token, bool ok, int64_t now)
{
    struct live *e = token;
    if (e == NULL)
        return;
    if (ok) {
        if (spare == NULL) { /* the common case: no lock */
            spare = e;
            return;
        }
        pthread_mutex_lock(&lock);
        entry_free_locked(e);
        pthread_mutex_unlock(&lock);
        return;
    }
    /* The real free failed: the memory is still there, put it back.  The
     * counters return to where they were (this is not a new allocation). */
    pthread_mutex_lock(&lock);
    struct site *s = site_of(e);
    counters.failed_frees++;
    if (is_handle(e)) {
        set_extra(e, 1);
        HASH_ADD(hh, handles, addr, sizeof e->addr, e);
    } else {
        HASH_ADD(hh, live_table, addr, sizeof e->addr, e);
    }
    if (nomem) { /* cannot put it back: forget it rather than lie */
        nomem = false;
        entry_free_locked(e);
    } else {
        account_locked(s, (int64_t)entry_size(e), now);
        pools[s->s.pool].kinds[s->s.kind].allocs--;
        pools[s->s.pool].kinds[s->s.kind].frees--;
        s->s.allocs--;
        s->s.frees--;
        s->s.alloc_bytes -= entry_size(e);
        if (e == last_temporary) {
            s->s.temporary--;
            last_temporary = NULL;
        }
        counters.live++;
    }
    pthread_mutex_unlock(&lock);
}

/* Only ever touched atomically: a signal handler increments it. */
static uint64_t reentrant_untracked;

void record_count_reentrant(void)
{
    __atomic_fetch_add(&reentrant_untracked, 1, __ATOMIC_RELAXED);
}

void record_thread_end(void)
{
    struct live *e = spare;
    spare = NULL;
    if (e != NULL) {
        pthread_mutex_lock(&lock);
        entry_free_locked(e);
        pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    HASH_ITER(hh, live_table, e, tmp) {
        struct site *s = site_of(e);
        if (e->owner != owner || s->s.kind == KIND_ASYNC || s->s.kind == KIND_VMM)
            continue;
        HASH_DELETE(hh, live_table, e);
        account_locked(s, -(int64_t)entry_size(e), now);
        counters.live--;
        bytes += entry_size(e);
        entry_free_locked(e);
    }
    pthread_mutex_unlock(&lock);
    return bytes;
}

void record_failure(enum record_kind kind, int device)
{
    pthread_mutex_lock(&lock);
    struct pool *p = &pools[pool_of(kind, device)];
    p->kinds[kind].failures++;
    p->active = true;
    pthread_mutex_unlock(&lock);
}

/* ---- VMM ---- */

/* Adds `r` to `*table`, and its size to `*bytes` and that counter's peak.
 * False when the address is already there or memory ran out. */
static bool range_add_locked(struct range **table, struct range *r,
                             uint64_t *bytes, uint64_t *peak)
{
    struct range *old;
    HASH_FIND(hh, *table, &r->addr, sizeof r->addr, old);
    if (old != NULL)
        return false;
    HASH_ADD(hh, *table, addr, sizeof r->addr, r);
    if (nomem) {
        nomem = false;
        return false;
    }
    *bytes += r->size;
    if (*bytes > *peak)
        *peak = *bytes;
    pools[r->pool].active = true;
    return true;
}

void record_vmm_reserve(int device, uintptr_t addr, uint64_t size)
{
    struct range *r = malloc(sizeof *r);
    if (r == NULL)
        return;
    r->addr = addr;
    r->size = size;
    r->pool = pool_of(KIND_VMM, device);
    pthread_mutex_lock(&lock);
    struct record_vmm_stats *v = &pools[r->pool].vmm;
    if (range_add_locked(&reservations, r, &v->reserved, &v->reserved_peak))
        r = NULL;
    pthread_mutex_unlock(&lock);
    free(r);
}

void record_vmm_unreserve(uintptr_t addr)
{
    struct range *r;
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, reservations, &addr, sizeof addr, r);
    if (r != NULL) {
        HASH_DELETE(hh, reservations, r);
        pools[r->pool].vmm.reserved -= r->size;
    }
    pthread_mutex_unlock(&lock);
    free(r);
}

void record_vmm_map(uintptr_t addr, uint64_t size, uintptr_t handle)
{
    struct range *m = malloc(sizeof *m);
    if (m == NULL)
        return;
    pthread_mutex_lock(&lock);
    struct live *h;
    HASH_FIND(hh, handles, &handle, sizeof handle, h);
    /* Imported handles (IPC, fabric) are not ours: their mappings are not
     * this process's memory either. */
    if (h != NULL) {
        m->addr = addr;
        m->size = size;
        m->pool = site_of(h)->s.pool;
        struct record_vmm_stats *v = &pools[m->pool].vmm;
        if (range_add_locked(&mappings, m, &v->mapped, &v->mapped_peak))
            m = NULL;
    }
    pthread_mutex_unlock(&lock);
    free(m);
}

void record_vmm_unmap(uintptr_t addr, uint64_t size)
{
    pthread_mutex_lock(&lock);
    uintptr_t a = addr, end = addr + size;
    while (a < end) {
        struct range *m;
        HASH_FIND(hh, mappings, &a, sizeof a, m);
        if (m == NULL)
            break;
        HASH_DELETE(hh, mappings, m);
        pools[m->pool].vmm.mapped -= m->size;
        a += m->size ? m->size : end - a;
        free(m);
    }
    pthread_mutex_unlock(&lock);
}

bool record_vmm_retain(uintptr_t handle)
{
    struct live *h;
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, handles, &handle, sizeof handle, h);
    if (h != NULL)
        set_extra(h, entry_extra(h) + 1u);
    pthread_mutex_unlock(&lock);
    return h != NULL;
}

void *record_vmm_release(uintptr_t handle, int64_t now)
{
    struct live *h;
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, handles, &handle, sizeof handle, h);
    if (h != NULL) {
        if (entry_extra(h) > 1) {
            set_extra(h, entry_extra(h) - 1u);
            h = NULL;
        } else {
            HASH_DELETE(hh, handles, h);
            account_locked(site_of(h), -(int64_t)entry_size(h), now);
            counters.live--;
        }
    }
    pthread_mutex_unlock(&lock);
    return h;
}

/* ---- limit and device truth ---- */

void record_set_limit(int device, uint64_t bytes)
{
    __atomic_store_n(&pools[pool_of(KIND_DEVICE, device)].limit, bytes,
                     __ATOMIC_RELAXED);
}

uint64_t record_limit(int device)
{
    return __atomic_load_n(&pools[pool_of(KIND_DEVICE, device)].limit,
                           __ATOMIC_RELAXED);
}

bool record_limit_reserve(int device, uint64_t bytes)
{
    struct pool *p = &pools[pool_of(KIND_DEVICE, device)];
    /* set once at init, before any hook runs */
    if (__atomic_load_n(&p->limit, __ATOMIC_RELAXED) == 0)
        return true;
    bool ok;
    pthread_mutex_lock(&lock);
    ok = p->current + p->inflight + bytes <= p->limit &&
         p->current + p->inflight + bytes >= bytes;
    if (ok)
        p->inflight += bytes;
    pthread_mutex_unlock(&lock);
    return ok;
}

void record_limit_settle(int device, uint64_t bytes)
{
    struct pool *p = &pools[pool_of(KIND_DEVICE, device)];
    if (__atomic_load_n(&p->limit, __ATOMIC_RELAXED) == 0)
        return;
    pthread_mutex_lock(&lock);
    assert(p->inflight >= bytes);
    p->inflight -= bytes;
    pthread_mutex_unlock(&lock);
}

uint64_t record_current(int pool)
{
    uint64_t v;
    pthread_mutex_lock(&lock);
    v = pools[pool < 0 ? RECORD_HOST_POOL : pool_of(KIND_DEVICE, pool)].current;
    pthread_mutex_unlock(&lock);
    return v;
}

void record_pool_kinds(int pool, uint64_t out[KIND_COUNT])
{
    uint32_t p = pool < 0 ? RECORD_HOST_POOL : pool_of(KIND_DEVICE, pool);
    pthread_mutex_lock(&lock);
    for (int k = 0; k < KIND_COUNT; k++)
        out[k] = pools[p].kinds[k].current;
    pthread_mutex_unlock(&lock);
}

void record_meminfo(int device, uint64_t free_bytes, uint64_t total_bytes)
{
    pthread_mutex_lock(&lock);
    struct pool *p = &pools[pool_of(KIND_DEVICE, device)];
    p->free_bytes = (int64_t)free_bytes;
    p->total_bytes = (int64_t)total_bytes;
    pthread_mutex_unlock(&lock);
}

/* ---- marks ---- */

void record_mark_set(struct record_mark saved[RECORD_POOLS], int64_t now)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < RECORD_POOLS; i++) {
        struct record_mark *m = &pools[i].mark;
        saved[i] = *m;
        /* Every site's current is its share of the new mark's peak. */
        m->base = m->peak = pools[i].current;
        m->time = m->peak_time = now;
        m->epoch++;
        m->sites_valid = true;
    }
    pthread_mutex_unlock(&lock);
}

void record_mark_restore(const struct record_mark saved[RECORD_POOLS])
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < RECORD_POOLS; i++) {
        struct record_mark *m = &pools[i].mark, inner = *m;
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
    pthread_mutex_unlock(&lock);
}

bool record_mark_get(int pool, struct record_mark *m, uint64_t *current)
{
    pthread_mutex_lock(&lock);
    struct pool *p = &pools[pool < 0 ? RECORD_HOST_POOL : pool_of(KIND_DEVICE, pool)];
    *m = p->mark;
    *current = p->current;
    bool active = p->active;
    pthread_mutex_unlock(&lock);
    return active;
}

/* ---- dump support ---- */

static unsigned bucket_of(uint64_t size)
{
    if (size <= 1)
        return 0;
    return 64 - (unsigned)__builtin_clzll(size - 1);
}

static void histogram_locked(struct record_view *v, struct live *table)
{
    for (struct live *e = table; e != NULL; e = e->hh.next) {
        struct record_pool_view *pv = &v->pools[site_of(e)->s.pool];
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

uint64_t record_activity(void)
{
    uint64_t n = 0;
    pthread_mutex_lock(&lock);
    for (int p = 0; p < RECORD_POOLS; p++)
        for (int k = 0; k < KIND_COUNT; k++)
            n += pools[p].kinds[k].allocs + pools[p].kinds[k].frees +
                 pools[p].kinds[k].failures;
    n += counters.unknown_frees + counters.failed_frees;
    pthread_mutex_unlock(&lock);
    return n;
}

int record_view_take(struct record_view *v)
{
    memset(v, 0, sizeof *v);
    pthread_mutex_lock(&lock);
    struct event_log_stats es = event_log_stats();
    v->sites = malloc((nsites ? nsites : 1) * sizeof *v->sites);
    v->stacks = malloc((nstacks ? nstacks : 1) * sizeof *v->stacks);
    v->events = malloc((es.kept ? es.kept : 1) * sizeof *v->events);
    if (!v->sites || !v->stacks || !v->events) {
        pthread_mutex_unlock(&lock);
        record_view_free(v);
        return -1;
    }
    for (int i = 0; i < RECORD_POOLS; i++) {
        struct pool *p = &pools[i];
        struct record_pool_view *pv = &v->pools[i];
        pv->active = p->active;
        pv->current = p->current;
        pv->peak = p->peak;
        pv->peak_time = p->peak_time;
        pv->limit = p->limit;
        pv->free_bytes = p->free_bytes;
        pv->total_bytes = p->total_bytes;
        memcpy(pv->kinds, p->kinds, sizeof pv->kinds);
        pv->vmm = p->vmm;
        pv->mark = p->mark;
    }
    histogram_locked(v, live_table);
    histogram_locked(v, handles);
    for (size_t i = 0; i < nstacks; i++) {
        v->stacks[i] = &stacks_by_id[i]->s;
        for (struct site *s = stacks_by_id[i]->sites; s; s = s->next) {
            struct record_site_view *sv = &v->sites[v->nsites++];
            bool saved = s->s.epoch == pools[s->s.pool].epoch;
            sv->stack = s->s.stack;
            sv->pool = s->s.pool;
            sv->kind = s->s.kind;
            sv->current = s->s.current;
            sv->count = s->s.count;
            sv->at_peak = saved ? s->s.at_peak : s->s.current;
            sv->at_peak_count = saved ? s->s.at_peak_count : s->s.count;
            saved = s->s.mark_epoch == pools[s->s.pool].mark.epoch;
            sv->mark_at_peak = saved ? s->s.mark_at_peak : s->s.current;
            sv->mark_at_peak_count = saved ? s->s.mark_at_peak_count : s->s.count;
            sv->allocs = s->s.allocs;
            sv->frees = s->s.frees;
            sv->alloc_bytes = s->s.alloc_bytes;
            sv->temporary = s->s.temporary;
        }
    }
    v->nstacks = nstacks;
    event_log_copy(v->events);
    v->nevents = es.kept;
    v->events_recorded = es.recorded;
    v->event_bucket_ns = es.bucket_ns;
    v->event_cap = es.cap;
    v->counters = counters;
    v->counters.reentrant_untracked =
        __atomic_load_n(&reentrant_untracked, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return 0;
}

void record_view_free(struct record_view *v)
{
    free(v->sites);
    free(v->stacks);
    free(v->events);
    memset(v, 0, sizeof *v);
}

/* ---- fork ---- */

void record_atfork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void record_atfork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void record_atfork_child(void)
{
    /* Only the forking thread survives, and it holds the lock: tear every
     * table down so the child starts empty, keeping the configuration. */
    HASH_CLEAR(hh, live_table);
    HASH_CLEAR(hh, handles);
    struct range *m, *mt;
    HASH_ITER(hh, mappings, m, mt) {
        HASH_DELETE(hh, mappings, m);
        free(m);
    }
    struct range *r, *rt;
    HASH_ITER(hh, reservations, r, rt) {
        HASH_DELETE(hh, reservations, r);
        free(r);
    }
    while (slabs != NULL) {
        struct slab *next = slabs->next;
        free(slabs);
        slabs = next;
    }
    free_entries = NULL;
    HASH_CLEAR(hh, stack_table);
    for (size_t i = 0; i < nstacks; i++) {
        struct stack_node *n = stacks_by_id[i];
        while (n->sites != NULL) {
            struct site *next = n->sites->next;
            free(n->sites);
            n->sites = next;
        }
        if (n != &unknown)
            free(n);
    }
    unknown.s.id = 0;
    free(site_table);
    site_table = NULL;
    nsites = sites_cap = 0;
    free(stacks_by_id);
    stacks_by_id = NULL;
    nstacks = stacks_cap = 0;
    event_log_reset();
    memset(&counters, 0, sizeof counters);
    __atomic_store_n(&reentrant_untracked, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < RECORD_POOLS; i++) {
        uint64_t limit = pools[i].limit;
        memset(&pools[i], 0, sizeof pools[i]);
        pools[i].limit = limit;
        pools[i].free_bytes = pools[i].total_bytes = -1;
    }
    tid_cache = 0;
    spare = NULL; /* it pointed into a slab just freed */
    pthread_mutex_unlock(&lock);
}
