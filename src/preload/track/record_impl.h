/* record_impl.h - the tracker's tables and counters, shared by the files
 * that implement record.h: record.c (the live recording path),
 * record_stacks.c (the stack table and its sites), record_vmm.c (VMM
 * ranges, the limit, device truth) and record_view.c (marks, queries, the
 * consistent copy dumps take).  Private to them, and to record_fast.h,
 * their steady state inline, which the allocation wrappers compile in:
 * nothing else includes it.  Every object declared here is guarded by
 * record_lock unless its comment says otherwise. */
#ifndef CUMEMTRACE_RECORD_IMPL_H
#define CUMEMTRACE_RECORD_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "record.h"
#include "record_table.h"

extern bool record_nomem; /* set by uthash when an insert could not allocate */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (record_nomem = true)
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

/* Aligned to a cache line, so that the counters every event writes
 * (record_site's first line) share it with nothing. */
struct site {
    struct record_site s;
    struct site *next; /* the stack's other sites (other pools) */
    /* What each event row of this site says, kept ready: stack id, pool
     * as rows name it (-1 host-pinned) and kind (record_event_tag). */
    uint64_t event_tag;
    /* record_pools[s.pool] and its kinds[s.kind], kept ready */
    struct pool *pool;
    struct record_kind_stats *kind_stats;
    uint32_t index;    /* in record_site_table */
    /* (pool, kind, phase) as site_match() packs them: a thread's cached
     * site is checked against an allocation in one compare */
    uint64_t match;
} __attribute__((aligned(64)));

static inline uint64_t site_match(uint32_t pool, enum record_kind kind, uint32_t phase)
{
    return (uint64_t)phase << 32 | (uint64_t)pool << 8 | (uint8_t)kind;
}

struct stack_node {
    uint64_t hash;
    UT_hash_handle hh;
    struct stack_node *collide; /* different stacks with an equal hash */
    struct site *sites;  /* of phase 0, by `next` */
    struct site *phased; /* of other phases, by `next` (found by
                            record_stacks.c's phase table) */
    struct record_stack s; /* last: flexible frames[] */
};

/* 32 bytes (the budget is 96 per live allocation, table slots
 * included: 16-byte slots at a load of 1/4 to 1/2 add 32-64): the size and
 * a 16-bit extra share a word (sizes stay below 2^48 = 256 TiB), the site is
 * a 32-bit index whose top bit marks a VMM handle. */
struct live {
    uintptr_t addr;      /* key; the next free entry while on a free list */
    uint64_t size_extra; /* bytes charged | extra << 48; extra: a handle's
                            references, else size - requested (saturating) */
    int64_t t_ns;
    uint32_t site;       /* index into record_site_table | HANDLE_BIT */
    /* The allocating thread's tid (Linux tids are below PID_MAX_LIMIT =
     * 2^22) | the owning context << 22 (owner_of, 10 bits), so a context's
     * destroy can find its memory: one word, written in one store. */
    uint32_t tid_owner;
};
#define TID_BITS 22
_Static_assert(sizeof(struct live) <= 32, "live entry over budget");

#define HANDLE_BIT 0x80000000u
#define SIZE_MASK ((UINT64_C(1) << 48) - 1)
#define EXTRA_MAX 0xffffu

/* Every site, by index.  Read outside the lock too (record_token_stack):
 * an outgrown table stays allocated (record.c), the pointer is atomic. */
extern struct site **record_site_table __attribute__((visibility("hidden")));

static inline struct site *site_of(const struct live *e)
{
    return __atomic_load_n(&record_site_table, __ATOMIC_ACQUIRE)[e->site & ~HANDLE_BIT];
}

static inline unsigned entry_owner(const struct live *e)
{
    return e->tid_owner >> TID_BITS;
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

/* What every event reads or writes comes first - current, peak, epoch and
 * the mark's peak and epoch fall in the first cache line - and a pool
 * starts a line, so two pools never share one. */
struct pool {
    uint64_t current, peak, epoch;
    struct record_mark mark;
    bool active; /* set with its first site (record_stacks.c), a failure
                    or a VMM range: not by each event */
    int64_t peak_time;
    uint32_t peak_phase; /* the allocating thread's phase when `peak` was
                            first reached (phases.h), 0 none */
    struct record_kind_stats kinds[KIND_COUNT];
    int64_t free_bytes, total_bytes;
    struct record_vmm_stats vmm;
} __attribute__((aligned(64)));
_Static_assert(offsetof(struct pool, mark.epoch) + 8 <= 64,
               "the fields every event touches share one line");

/* The limit apart from the counters: every allocation reads it (unlocked)
 * while other threads write the counters, and sharing a cache line would
 * make each read a miss. */
struct pool_limit {
    uint64_t limit;    /* set once at start-up; 0 = none */
    uint64_t inflight; /* reserved by calls in progress (under the lock) */
} __attribute__((aligned(64)));

/* ---- the lock: a futex mutex (Drepper, "Futexes Are Tricky", mutex 2) ----
 * Uncontended, a lock and an unlock are one atomic each, fewer steps than
 * a pthread mutex round trip.  Contended, a thread spins
 * briefly, backing off between polls, then sleeps in the kernel, so a
 * preempted holder never has its waiters burn their cores.
 * States: 0 free, 1 held, 2 held with (possible) sleepers.
 *
 * The lock word shares its cache line with what every allocation and free
 * writes under it besides its site, pool and event row: a thread that
 * takes the lock gets them in the same transfer, and since a waiter backs
 * off between polls (record_lock_wait) the holder's writes mostly find the
 * line still its own.  Between two threads taking turns, every line the
 * critical section writes crosses cores once per turn (hundreds of ns on
 * a VM, more than the section itself): fewer lines is what shortens it.
 * Nothing read outside the lock shares this line. */
struct record_locked {
    int lock;
    struct addr_table live_table, handles;
    /* The latest allocation, while nothing else was allocated since, and
     * the latest free counted as temporary (a failed free takes it back):
     * compared with, never read through. */
    const struct live *last_alloc, *last_temporary;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct record_locked) == 64, "one cache line");
extern struct record_locked record_locked __attribute__((visibility("hidden")));
#define record_lock (record_locked.lock)
#define record_live_table (record_locked.live_table)
#define record_handles (record_locked.handles)
#define record_last_alloc (record_locked.last_alloc)
#define record_last_temporary (record_locked.last_temporary)

/* The lock's slow paths (record.c): record_lock_wait takes the lock
 * however it is held (as LOCK_HELD, or LOCK_SLEEPERS after sleeping);
 * record_lock_wake wakes one sleeper. */
void record_lock_wait(int *m);
void record_lock_wake(int *m);

/* Debug builds (CUMEMTRACE_DEBUG: the sanitizer suites, test_record_debug)
 * keep the lock's holder, so that every *_locked function asserts it runs
 * under the lock (jemalloc's owner assert); other builds pay nothing.  The
 * holder is the address of a thread-local byte: a thread's own, no call. */
#ifdef CUMEMTRACE_DEBUG
#include <assert.h>
extern __thread char record_lock_me;
extern const char *record_lock_holder;
#define RECORD_HOLDER_SET(p) __atomic_store_n(&record_lock_holder, (p), __ATOMIC_RELAXED)
#define RECORD_ASSERT_LOCKED() \
    assert(__atomic_load_n(&record_lock_holder, __ATOMIC_RELAXED) == &record_lock_me)
#else
#define RECORD_HOLDER_SET(p) ((void)0)
#define RECORD_ASSERT_LOCKED() ((void)0)
#endif

#define LOCK_FREE 0
#define LOCK_HELD 1
#define LOCK_SLEEPERS 2

static inline void record_lock_take(int *m)
{
    int free_state = LOCK_FREE;
    if (!__atomic_compare_exchange_n(m, &free_state, LOCK_HELD, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        record_lock_wait(m);
    RECORD_HOLDER_SET(&record_lock_me);
}

static inline void record_lock_drop(int *m)
{
    RECORD_HOLDER_SET(NULL);
    if (__atomic_exchange_n(m, LOCK_FREE, __ATOMIC_RELEASE) == LOCK_SLEEPERS)
        record_lock_wake(m);
}

/* At a pool's new peak, under the lock: keeps who reached it
 * (record_peak.c).  Out of line: the hot path only calls it. */
void record_peak_note_locked(const struct pool *p) __attribute__((cold));

extern uint32_t record_nsites;
extern struct pool record_pools[RECORD_POOLS];
extern struct pool_limit record_limits[RECORD_POOLS];
extern struct stack_node **record_stacks_by_id; /* index id-1 */
extern size_t record_nstacks;
extern struct record_counters record_totals;
/* Marks set and not yet restored (record_view.c; zero in a fork child). */
extern int record_mark_depth;
/* Only ever touched atomically: a signal handler increments it. */
extern uint64_t record_reentrant;

/* The pool an allocation of `kind` on `device` counts in. */
static inline uint32_t record_pool_of(enum record_kind kind, int device)
{
    if (FORMAT_KIND_ON_HOST(kind))
        return RECORD_HOST_POOL;
    if (device < 0)
        return 0;
    if (device >= RECORD_MAX_DEVICES)
        return RECORD_MAX_DEVICES - 1;
    return (uint32_t)device;
}

/* ---- stacks and sites (record_stacks.c) ---- */

/* Four independent lanes: a single multiply chain over 32 frames is bound
 * by multiply latency; four chains overlap in the pipeline.  The lanes are
 * scalars and the loop is unrolled by hand: as an array in a nested loop
 * they cost about three times the instructions a frame. */
#define STACK_MIX(h, f) (h ^= (uint64_t)(uintptr_t)(f), h *= k, h ^= h >> 29)
static inline uint64_t record_stack_hash(unsigned entry, void *const *frames, unsigned depth)
{
    if (depth == 0) /* CUMEMTRACE_DEPTH=0: one stack per entry point */
        return 0x9E3779B97F4A7C15ULL * (entry + 1);
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

static inline bool record_stack_equal(const struct record_stack *s, unsigned entry,
                               void *const *frames, unsigned depth)
{
    return s->entry == entry && s->depth == depth &&
           (depth == 0 || memcmp(s->frames, frames, depth * sizeof(void *)) == 0);
}

/* Finds or creates the stack of hash `h` (record_stack_hash).  NULL only
 * when memory is exhausted. */
struct record_stack *record_intern_locked(uint64_t h, unsigned entry,
                                          void *const *frames, unsigned depth);
/* The site of (stack, pool, kind, phase), created on first use; a NULL stack is
 * the shared stack of allocations whose stack could not be stored.  NULL
 * when memory is exhausted. */
struct site *record_site_get_locked(struct record_stack *stack, uint32_t pool,
                                    enum record_kind kind, uint32_t phase);
/* Frees every stack and site: the fork child's reset. */
void record_stacks_reset_locked(void);

/* Applies +/- bytes of one allocation to its site and pool (record.c). */
void record_account_locked(struct site *s, int64_t bytes, int64_t now);
/* Returns an entry to the free list (record.c). */
void record_entry_free_locked(struct live *e);
/* Empties the VMM range tables: the fork child's reset (record_vmm.c). */
void record_vmm_reset_locked(void);

#endif
