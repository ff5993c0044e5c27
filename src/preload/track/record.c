/* record.c - the tracker's live recording path: live allocations keyed by
 * address, per-pool counters and exact peak attribution.  Its siblings:
 * record_stacks.c (the deduplicated stack table and its call sites),
 * record_vmm.c (VMM ranges, the limit), record_view.c (marks, queries, the
 * copy a dump takes); the state they share is in record_impl.h.
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
 * Peak attribution in O(1) (docs/design.md, "Facts"): each pool has an `epoch` that a new
 * peak increments.  Before a site's `current` changes, if its epoch is older
 * than the pool's, its `current` is what it held at the latest peak, so it is
 * saved into `at_peak` and the epoch refreshed.  At dump time a site whose
 * epoch is still older was untouched since the peak: at_peak = current.
 * Invariant (asserted in tests): the sites' at_peak of a pool sum to its peak.
 * The peak since a mark (record_mark_set) is a second such peak per pool,
 * with its own epoch and per-site fields, kept by the same few instructions.
 *
 * Threads: one lock (record_lock, a futex mutex: a syscall only when
 * contended) guards every table and counter; a thread alone takes it once
 * per allocation and once per free.  Exact peak attribution needs every
 * event in one total order, which the lock gives; sharding the counters
 * (per-thread sites and a global atomic for a pool's bytes) would still
 * need every site's holdings at the instant of a new peak, i.e. the same
 * order.  So the critical section holds only what that order needs, and
 * everything else is done before the lock is taken: stack capture and
 * hashing; this thread's cache of the stacks (and their sites) it
 * allocated from - stacks are immutable once published and a site's pool
 * and kind never change, so a hit needs no lock, and dumps read frames
 * without it (a site is also keyed by the thread's phase: one compare
 * more); the entry, from a per-thread free list, filled in full but for
 * its site; the time, read by the caller and only clamped under the lock
 * (event_log_stamp).  Under the lock, per event: one probe of an
 * open-addressed table (record_table.h), the site's, pool's and kind's
 * counters through pointers the site keeps ready, and a log row of four
 * stores (event_log_add).  The state it writes is laid out by cache line
 * (record_impl.h): the lock word with the tables' heads and the latest
 * allocation, each pool's and each site's hot counters on their own line,
 * the log's cursor on its own.
 *
 * One lock for every event, as heaptrack takes one for every malloc.
 * Per-thread rings of counter rows, drained in time order by whoever took
 * the lock, were tried for threads that contend: they added instructions
 * to every event and measured no gain in CPU or throughput at 1 and 2
 * threads on the machines this is built on (docs/performance.md,
 * "Threads"), so the order stays the lock's and no second proof of it is
 * needed.
 *
 * The steady state of both paths - record_alloc_at and record_free_take
 * with the stack's site in this thread's cache, an entry parked, the
 * table and the log with room, the lock free - is record_fast.h's inline
 * code, which the wrappers compile into their own bodies; this file
 * defines the same entry points for every other caller, and the rest.
 *
 * Limitations: a stream-ordered free is accounted when it is issued, not when
 * the stream reaches it; managed memory is assumed resident on its device.
 */
#include "record_fast.h"

#include <assert.h>
#include <errno.h>
#include <linux/futex.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the state record_impl.h declares ---- */

struct record_locked record_locked;
bool record_nomem;
struct pool record_pools[RECORD_POOLS];
struct pool_limit record_limits[RECORD_POOLS];
static struct live *free_entries;
struct record_counters record_totals;
uint64_t record_reentrant;
#ifdef CUMEMTRACE_DEBUG
__thread char record_lock_me;
const char *record_lock_holder;
#endif

/* ---- the lock's slow paths (record_impl.h has the fast ones) ---- */

/* A waiter polls with a pause between (doubling up to LOCK_BACKOFF_MAX,
 * so that its reads leave the holder the line it writes), and sleeps after
 * LOCK_SPIN_PAUSES pauses in all (~10-100 us, by the CPU's pause): a
 * critical section is ~100 instructions, a futex round trip thousands,
 * and a holder preempted for longer should not have its waiter spin. */
#define LOCK_BACKOFF_MAX 64
#define LOCK_SPIN_PAUSES 2000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void record_lock_wait(int *m)
{
    int v = 0;
    for (unsigned spent = 0, delay = 1; spent < LOCK_SPIN_PAUSES; spent += delay) {
        v = __atomic_load_n(m, __ATOMIC_RELAXED);
        if (v == LOCK_FREE &&
            __atomic_compare_exchange_n(m, &v, LOCK_HELD, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        for (unsigned i = 0; i < delay; i++)
            cpu_relax();
        if (delay < LOCK_BACKOFF_MAX)
            delay *= 2;
    }
    int saved = errno; /* the host's errno survives our futex calls */
    for (;;) {
        /* taken as LOCK_SLEEPERS, as Drepper's mutex 2: its release wakes
         * whoever may sleep behind */
        v = __atomic_load_n(m, __ATOMIC_RELAXED);
        if (v == LOCK_FREE) {
            if (__atomic_compare_exchange_n(m, &v, LOCK_SLEEPERS, false, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                break;
            continue;
        }
        if (v != LOCK_SLEEPERS &&
            !__atomic_compare_exchange_n(m, &v, LOCK_SLEEPERS, false, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        syscall(SYS_futex, m, FUTEX_WAIT_PRIVATE, LOCK_SLEEPERS, NULL, NULL, 0);
    }
    errno = saved;
}

void record_lock_wake(int *m)
{
    int saved = errno;
    syscall(SYS_futex, m, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

/* Entries come from slabs, in the tracker's own pages (record_pages.h): no
 * allocation per allocation after warm-up, none on the host's heap. */
#define SLAB_ENTRIES 1024
struct slab {
    struct slab *next;
    struct live e[SLAB_ENTRIES];
};
static struct slab *slabs;

/* record_tc is a member of thread_hot (thread/thread_hot.c). */

uint32_t record_current_tid(void)
{
    /* Linux tids are below PID_MAX_LIMIT = 2^22: the mask changes nothing,
     * it only tells record_entry_fill it needs none */
    if (record_tc.tid == 0)
        record_tc.tid = (uint32_t)syscall(SYS_gettid) & ((1u << TID_BITS) - 1);
    return record_tc.tid;
}

const char *record_kind_name(enum record_kind kind)
{
#define KIND_NAME(sym, name, on_device, with_context, placed, phrase) name,
    static const char *const names[KIND_COUNT] = {FORMAT_KINDS(KIND_NAME)};
#undef KIND_NAME
    return (unsigned)kind < KIND_COUNT ? names[kind] : "unknown";
}

void record_init(size_t cap, int64_t (*clock)(void))
{
    record_lock_take(&record_lock);
    event_log_init(cap, clock);
    for (int i = 0; i < RECORD_POOLS; i++) {
        record_pools[i].free_bytes = -1;
        record_pools[i].total_bytes = -1;
    }
    record_lock_drop(&record_lock);
}

int64_t record_temporary_window_ns;

void record_set_temporary(int64_t window_ns)
{
    record_temporary_window_ns = window_ns > 0 ? window_ns : 0;
}

/* ---- stacks (record_stacks.c keeps the table) ---- */

struct record_stack *record_stack_intern(unsigned entry, void *const *frames,
                                         unsigned depth)
{
    if (depth > RECORD_MAX_DEPTH)
        depth = RECORD_MAX_DEPTH;
    uint64_t h = record_stack_hash(entry, frames, depth); /* outside the lock */
    struct record_stack_slot *c = record_tc_slot(record_tc.stacks, h);
    if (c->st != NULL && c->hash == h && record_stack_equal(c->st, entry, frames, depth))
        return c->st;
    record_lock_take(&record_lock);
    struct record_stack *st = record_intern_locked(h, entry, frames, depth);
    record_lock_drop(&record_lock);
    if (st != NULL)
        *record_tc_victim(record_tc.stacks, h) = (struct record_stack_slot){h, st, NULL};
    return st;
}

/* ---- entries ---- */

static struct live *entry_new_locked(void)
{
    RECORD_ASSERT_LOCKED();
    if (free_entries == NULL) {
        struct slab *sl = record_pages(sizeof *sl);
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
    return e;
}

void record_entry_free_locked(struct live *e)
{
    RECORD_ASSERT_LOCKED();
    e->addr = (uintptr_t)free_entries;
    free_entries = e;
}

/* A thread that found no entry parked takes a batch here, under the lock
 * it took for the one it lacked, so that its next allocations find theirs
 * without the lock: a thread that allocates more than it has just freed
 * (a window of more than RECORD_TC_FREE_MAX allocations freed oldest
 * first) ran out and took the slow path for every allocation after. */
#define REFILL_ENTRIES (RECORD_TC_FREE_MAX / 2)
static void entries_refill_locked(void)
{
    /* a run of the shared list, in one walk; fresh entries for the rest */
    struct live *first = free_entries, *last = NULL;
    unsigned n = 0;
    for (struct live *e = first; e != NULL && n < REFILL_ENTRIES; e = (struct live *)e->addr) {
        last = e;
        n++;
    }
    if (last != NULL) {
        free_entries = (struct live *)last->addr;
        last->addr = (uintptr_t)record_tc.free;
        record_tc.free = first;
        record_tc.nfree += n;
    }
    for (; n < REFILL_ENTRIES; n++) {
        struct live *e = entry_new_locked();
        if (e == NULL)
            return;
        e->addr = (uintptr_t)record_tc.free;
        record_tc.free = e;
        record_tc.nfree++;
    }
}

/* This thread's parked entry, or NULL (no lock). */
static inline struct live *entry_take(void)
{
    struct live *e = record_tc.free;
    if (e != NULL) {
        record_tc.free = (struct live *)e->addr;
        record_tc.nfree--;
    }
    return e;
}

/* Hands back the `n` most recently parked entries (all: UINT_MAX), in one
 * walk from the head of the thread's list. */
static void entries_give_back_first(unsigned n)
{
    struct live *first = record_tc.free, *last = first;
    if (first == NULL || n == 0)
        return;
    unsigned given = 1;
    while (given < n && last->addr != 0) {
        last = (struct live *)last->addr;
        given++;
    }
    record_tc.free = (struct live *)last->addr;
    record_tc.nfree = record_tc.free != NULL ? record_tc.nfree - given : 0;
    record_lock_take(&record_lock);
    last->addr = (uintptr_t)free_entries;
    free_entries = first;
    record_lock_drop(&record_lock);
}

/* The free path's: past RECORD_TC_FREE_MAX parked, all but half go back -
 * all of them left the thread's next allocations none, each then taking
 * the slow path, after a long run of frees.  Keeping half, and a refill of
 * half when none is left: a thread that allocates and frees a window of
 * up to half the maximum in turn settles where neither happens (the parked
 * entries cover its allocations, its frees stay within the maximum). */
void record_entries_overflow(void)
{
    entries_give_back_first(record_tc.nfree - RECORD_TC_FREE_MAX / 2);
}

/* ---- counters (record_fast.h has the accounting) ---- */

#define COLD static __attribute__((noinline, cold))

void record_account_locked(struct site *s, int64_t bytes, int64_t now)
{
    RECORD_ASSERT_LOCKED();
    if (bytes >= 0)
        record_account_alloc_locked(s, (uint64_t)bytes, now);
    else
        record_account_free_locked(s, (uint64_t)-bytes, now);
}

/* Drops a live entry found at `slot` of `t`: the memory is gone. */
static void forget_locked(struct addr_table *t, struct table_slot *slot, int64_t now)
{
    RECORD_ASSERT_LOCKED();
    struct live *e = slot->e;
    table_remove(t, slot);
    record_account_free_locked(site_of(e), entry_size(e), now);
    record_entry_free_locked(e);
}

__attribute__((cold)) struct live *
record_entry_new_filled_locked(const struct record_alloc *a, int64_t now, uint32_t tid)
{
    struct live *e = entry_new_locked();
    if (e != NULL)
        record_entry_fill(e, a, now, tid);
    return e;
}

__attribute__((cold)) void record_alloc_replace_locked(const struct record_alloc *a,
                                                       struct live *old, int64_t now)
{
    if (!a->is_handle)
        record_account_free_locked(site_of(old), entry_size(old), now);
    record_entry_free_locked(old);
}

/* A miss of this thread's cache: the stack (interned now if `st` is NULL)
 * and its site for (pool, kind), both remembered in cache slot `c`. */
COLD struct site *site_miss_locked(struct record_stack_slot *c, struct record_stack *st,
                                   uint64_t h, unsigned entry, void *const *frames,
                                   unsigned depth, uint32_t pool, enum record_kind kind,
                                   uint32_t phase)
{
    if (st == NULL && (st = record_intern_locked(h, entry, frames, depth)) != NULL)
        *c = (struct record_stack_slot){h, st, NULL};
    struct site *s = record_site_get_locked(st, pool, kind, phase);
    if (st != NULL && c->st == st)
        c->site = s;
    return s;
}

void record_alloc(const struct record_alloc *a, struct record_stack *stack,
                  int64_t now)
{
    uint32_t tid = record_current_tid();
    struct live *e = entry_take();
    if (e != NULL)
        record_entry_fill(e, a, now, tid);
    record_lock_take(&record_lock);
    record_alloc_locked(a,
                        record_site_get_locked(stack, record_pool_of(a->kind, a->device),
                                               a->kind, a->phase),
                        now, tid, e);
    record_lock_drop(&record_lock);
}

__attribute__((noinline, cold)) void
record_alloc_at_slow(const struct record_alloc *a, unsigned entry, void *const *frames,
                     unsigned depth, int64_t now, uint64_t h, uint32_t pool)
{
    struct record_stack_slot *c = record_tc_slot(record_tc.stacks, h);
    struct record_stack *st = NULL;
    struct site *s = NULL;
    if (c->st != NULL && c->hash == h && record_stack_equal(c->st, entry, frames, depth)) {
        st = c->st;
        s = c->site;
        if (s != NULL && s->match != site_match(pool, a->kind, a->phase))
            s = NULL;
    } else {
        c = record_tc_victim(record_tc.stacks, h);
    }
    uint32_t tid = record_current_tid();
    struct live *e = entry_take();
    if (e != NULL)
        record_entry_fill(e, a, now, tid);
    record_lock_take(&record_lock);
    if (e == NULL)
        entries_refill_locked();
    if (__builtin_expect(s == NULL, 0))
        s = site_miss_locked(c, st, h, entry, frames, depth, pool, a->kind, a->phase);
    record_alloc_locked(a, s, now, tid, e);
    record_lock_drop(&record_lock);
}

/* The wrappers inline these three (record_fast.h); the other callers
 * (the generic path, the tests) call them here. */
void record_alloc_at(const struct record_alloc *a, unsigned entry,
                     void *const *frames, unsigned depth, int64_t now)
{
    record_alloc_fast(a, entry, frames, depth, now);
}

__attribute__((noinline, cold)) void *record_free_refused_unlock(bool known)
{
    if (known)
        record_totals.wrong_kind_frees++;
    else
        record_totals.unknown_frees++;
    record_lock_drop(&record_lock);
    return NULL;
}

void *record_free_take(uintptr_t addr, enum record_kind kind_hint,
                       int64_t now)
{
    return record_free_take_fast(addr, kind_hint, now);
}

/* The real free failed: the memory is still there, put it back.  The
 * counters return to where they were (this is not a new allocation). */
COLD void free_undo(struct live *e, int64_t now)
{
    record_lock_take(&record_lock);
    struct site *s = site_of(e);
    record_totals.failed_frees++;
    struct addr_table *t = &record_live_table;
    if (is_handle(e)) {
        set_extra(e, 1);
        t = &record_handles;
    }
    if (!table_add(t, e->addr, e)) { /* cannot put it back: forget it rather than lie */
        record_entry_free_locked(e);
    } else {
        record_account_alloc_locked(s, entry_size(e), now);
        record_pools[s->s.pool].kinds[s->s.kind].allocs--;
        record_pools[s->s.pool].kinds[s->s.kind].frees--;
        s->s.allocs--;
        s->s.frees--;
        s->s.alloc_bytes -= entry_size(e);
        if (e == record_last_temporary) {
            s->s.temporary--;
            record_last_temporary = NULL;
        }
    }
    record_lock_drop(&record_lock);
}

void record_free_finish(void *token, bool ok, int64_t now)
{
    struct live *e = token;
    if (__builtin_expect(e == NULL, 0))
        return;
    if (__builtin_expect(!ok, 0)) {
        free_undo(e, now);
        return;
    }
    record_free_done_fast(e);
}

void record_count_reentrant(void)
{
    __atomic_fetch_add(&record_reentrant, 1, __ATOMIC_RELAXED);
}

void record_thread_end(void)
{
    entries_give_back_first(UINT_MAX); /* every parked entry */
}

uint64_t record_token_size(const void *token)
{
    if (token == NULL)
        return 0;
    /* taken out of every table: the caller's until it finishes the free */
    return entry_size(token);
}

uint32_t record_token_stack(const void *token)
{
    if (token == NULL)
        return 0;
    const struct record_stack *st = site_of(token)->s.stack;
    return st ? st->id : 0;
}

uint64_t record_drop_context(int device, unsigned ctx, int64_t now)
{
    unsigned owner = record_owner_of(device, ctx);
    uint64_t bytes = 0;
    if (owner == 0)
        return 0;
    record_lock_take(&record_lock);
    struct addr_table *t = &record_live_table;
    for (uint32_t i = 0; i < table_size(t);) {
        struct live *e = t->slots[i].e;
        if (e == NULL || entry_owner(e) != owner ||
            !FORMAT_KIND_WITH_CONTEXT(site_of(e)->s.kind)) {
            i++;
            continue;
        }
        bytes += entry_size(e);
        forget_locked(t, &t->slots[i], now); /* slot i may now hold another */
    }
    record_lock_drop(&record_lock);
    return bytes;
}

uint64_t record_drop_entries(const struct record_owned *v, size_t n, int64_t now)
{
    unsigned owner = record_owner_of(0, RECORD_CONTEXT_OVERFLOW);
    uint64_t bytes = 0;
    record_lock_take(&record_lock);
    for (size_t i = 0; i < n; i++) {
        struct table_slot *slot = table_find(&record_live_table, v[i].addr);
        struct live *e = slot ? slot->e : NULL;
        if (e == NULL || entry_owner(e) != owner || e->t_ns > v[i].t_upper ||
            !FORMAT_KIND_WITH_CONTEXT(site_of(e)->s.kind))
            continue;
        bytes += entry_size(e);
        forget_locked(&record_live_table, slot, now);
    }
    record_lock_drop(&record_lock);
    return bytes;
}

void record_failure(enum record_kind kind, int device)
{
    record_lock_take(&record_lock);
    struct pool *p = &record_pools[record_pool_of(kind, device)];
    p->kinds[kind].failures++;
    p->active = true;
    record_lock_drop(&record_lock);
}

/* ---- fork ---- */

void record_atfork_prepare(void)
{
    record_lock_take(&record_lock); /* no thread is inside an event: the child's copy is whole */
}

void record_atfork_parent(void)
{
    record_lock_drop(&record_lock);
}

void record_atfork_child(void)
{
    /* Only the forking thread survives, and it holds the lock: tear every
     * table down so the child starts empty, keeping the configuration. */
    table_clear(&record_live_table);
    table_clear(&record_handles);
    record_vmm_reset_locked();
    while (slabs != NULL) {
        struct slab *next = slabs->next;
        record_pages_free(slabs, sizeof *slabs);
        slabs = next;
    }
    free_entries = NULL;
    record_stacks_reset_locked();
    record_last_alloc = record_last_temporary = NULL;
    event_log_reset();
    memset(&record_totals, 0, sizeof record_totals);
    record_mark_depth = 0; /* marks are the parent's (mark.c forgets its own) */
    __atomic_store_n(&record_reentrant, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < RECORD_POOLS; i++) {
        memset(&record_pools[i], 0, sizeof record_pools[i]);
        record_pools[i].free_bytes = record_pools[i].total_bytes = -1;
        record_limits[i].inflight = 0;
    }
    /* this thread's cache pointed into the stacks and slabs just freed */
    memset(&record_tc, 0, sizeof record_tc);
    /* the parent's waiters are not in this process: a plain release */
    RECORD_HOLDER_SET(NULL);
    __atomic_store_n(&record_lock, LOCK_FREE, __ATOMIC_RELEASE);
}
