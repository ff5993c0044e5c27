/* record_fast.h - the tracker's steady-state allocation and free, inline.
 *
 * The allocation wrappers (interpose/hooks_fast.h) compile these into
 * their own bodies, so that a traced cudaMalloc+cudaFree pair crosses no
 * function of the tracker: the calls' prologues and epilogues, the struct
 * record_alloc passed through memory and read back, the reloads of what
 * the wrapper had in registers, and the tests of what is constant at a
 * wrapper (its kind, entry point and free hint) were a large share of
 * what a pair added with no stack.  record.c's record_alloc_at
 * and record_free_take are these same functions, out of line, for every
 * other caller; everything but the steady state - a stack or site not in
 * this thread's cache, no parked entry, a full table or log - is out of
 * line in record.c.  The design, the invariants and what the lock guards
 * are record.c's (top of file).
 *
 * Private to the tracker and the wrappers' fast path: it is the tracker's
 * state (record_impl.h).  Include it from nothing else.
 */
#ifndef CUMEMTRACE_RECORD_FAST_H
#define CUMEMTRACE_RECORD_FAST_H

#include "record_impl.h"

#include "event_log.h"
#include "thread_hot.h"

#pragma GCC visibility push(hidden) /* direct addressing, no GOT entries */

/* always_inline: the allocation and free paths are one function each, with
 * one prologue (each call's cost is a visible share of so short a path);
 * the out-of-line functions below keep the rare cases out of them. */
#define RECORD_HOT static inline __attribute__((always_inline))

/* ---- per-thread state: what the hot path reads without the lock ---- */

/* record_tc (thread_hot.h): this thread's cache of stacks and sites, and
 * its parked entries (the types: record_thread.h). */

/* ---- out of line (record.c) ---- */

/* No entry was parked for this thread: one from the shared list, filled
 * (NULL when memory is exhausted). */
struct live *record_entry_new_filled_locked(const struct record_alloc *a, int64_t now,
                                            uint32_t tid);
/* An entry of the same address is still live (freed behind our back, or a
 * handle the driver reused): drops it. */
void record_alloc_replace_locked(const struct record_alloc *a, struct live *old,
                                 int64_t now);
/* record_alloc_fast's other cases: the stack or its site not in this
 * thread's cache yet, no parked entry, the thread's id unknown. */
void record_alloc_at_slow(const struct record_alloc *a, unsigned entry,
                          void *const *frames, unsigned depth, int64_t now,
                          uint64_t h, uint32_t pool);
/* A free the tracker cannot take (unknown: never seen; known: of another
 * kind): counts it and drops the lock; returns NULL. */
void *record_free_refused_unlock(bool known);
void record_entries_overflow(void);

/* ---- owners ---- */

/* Owners: 0 none known (never dropped), 1 + d the primary context of
 * device d, RECORD_OWNER_CREATED + n created context n. */
#define RECORD_OWNER_CREATED (1 + RECORD_MAX_DEVICES - 1)
_Static_assert(RECORD_OWNER_CREATED + RECORD_CONTEXT_OVERFLOW < 1u << (32 - TID_BITS),
               "owner is 10 bits");

static inline unsigned record_owner_of(int device, unsigned ctx)
{
    if (ctx != 0)
        return ctx <= RECORD_CONTEXT_OVERFLOW ? RECORD_OWNER_CREATED + ctx : 0;
    return device >= 0 && device < RECORD_MAX_DEVICES ? 1u + (unsigned)device : 0;
}

/* ---- counters ---- */

/* Before a site's holdings change: if the pool reached a new peak (or mark
 * peak) since the site last changed, what it holds now is what it held
 * then. */
RECORD_HOT void record_epoch_sync(struct site *s, const struct pool *p)
{
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
}

/* Applies an allocation of `bytes` to its site and pool.  The site is
 * updated first and the pool's epoch bumped after, so a site that sets a new
 * peak counts as "untouched since the peak" - its current is its at_peak. */
RECORD_HOT void record_account_alloc_locked(struct site *s, uint64_t bytes, int64_t now)
{
    struct pool *p = s->pool;
    struct record_kind_stats *k = s->kind_stats;

    now = event_log_stamp(now); /* the caller's time, in lock order */
    record_epoch_sync(s, p);
    s->s.current += bytes;
    s->s.count++;
    s->s.allocs++;
    s->s.alloc_bytes += bytes;
    uint64_t current = p->current + bytes;
    p->current = current;
    k->current += bytes;
    k->allocs++;
    if (k->current > k->peak) {
        k->peak = k->current;
        k->peak_time = now;
    }
    if (current > p->peak) {
        p->peak = current;
        p->peak_time = now;
        p->peak_phase = s->s.phase;
        p->epoch++;
        record_peak_note_locked(p);
    }
    if (current > p->mark.peak) {
        p->mark.peak = current;
        p->mark.peak_time = now;
        p->mark.epoch++;
        p->mark.sites_valid = true;
    }
    event_log_add(now, (int64_t)bytes, current, s->event_tag);
}

RECORD_HOT void record_account_free_locked(struct site *s, uint64_t bytes, int64_t now)
{
    struct pool *p = s->pool;
    struct record_kind_stats *k = s->kind_stats;

    now = event_log_stamp(now);
    record_epoch_sync(s, p);
    s->s.current -= bytes;
    s->s.count--;
    s->s.frees++;
    uint64_t current = p->current - bytes;
    p->current = current;
    k->current -= bytes;
    k->frees++;
    event_log_add(now, -(int64_t)bytes, current, s->event_tag);
}

/* ---- allocations ---- */

/* Writes what allocation `a` says into entry `e`, all but its site, which
 * may be known only under the lock.  An entry is its thread's until the
 * table holds it: no lock. */
RECORD_HOT void record_entry_fill(struct live *e, const struct record_alloc *a, int64_t now,
                                  uint32_t tid)
{
    /* a cuMemCreate handle's extra is its reference count */
    uint64_t extra = a->is_handle ? 1 : a->requested >= a->size ? 0 : a->size - a->requested;
    e->addr = a->addr;
    e->t_ns = now;
    e->tid_owner = tid | record_owner_of(a->device, a->ctx) << TID_BITS; /* tid < 2^22 */
    e->size_extra = (a->size & SIZE_MASK) | (extra > EXTRA_MAX ? EXTRA_MAX : extra) << 48;
}

/* `e` (filled by record_entry_fill, or NULL for a fresh one) becomes the
 * allocation `a` at site `s` (NULL: out of memory, nothing is recorded). */
RECORD_HOT void record_alloc_locked(const struct record_alloc *a, struct site *s,
                                    int64_t now, uint32_t tid, struct live *e)
{
    if (__builtin_expect(s == NULL, 0)) {
        if (e != NULL)
            record_entry_free_locked(e);
        return;
    }
    if (__builtin_expect(e == NULL, 0)) {
        struct record_alloc copy = *a; /* see record_alloc_fast */
        if ((e = record_entry_new_filled_locked(&copy, now, tid)) == NULL)
            return;
    }
    struct addr_table *t = &record_live_table;
    e->site = s->index;
    if (__builtin_expect(a->is_handle, 0)) {
        /* cuMemCreate handle (device- or host-located): refcounted. */
        e->site |= HANDLE_BIT;
        t = &record_handles;
    }
    struct table_slot *slot = table_slot(t, e->addr);
    if (__builtin_expect(slot == NULL, 0)) {
        record_entry_free_locked(e);
        return;
    }
    if (__builtin_expect(slot->e == NULL, 1)) {
        slot->key = e->addr;
        t->count++;
    } else {
        struct record_alloc copy = *a;
        record_alloc_replace_locked(&copy, slot->e, now);
    }
    slot->e = e;
    record_account_alloc_locked(s, a->size, now);
    record_last_alloc = e;
}

/* record_alloc_at (record.h), inline.  Outside the lock: the hash, this
 * thread's cached stack and site (a site's pool and kind never change, and
 * the cache is this thread's), the entry.  The steady state - all three at
 * hand - is one straight path (a cached site implies its stack:
 * record_alloc_at_slow); anything else is record_alloc_at_slow's. */
RECORD_HOT void record_alloc_fast(const struct record_alloc *a, unsigned entry,
                                  void *const *frames, unsigned depth, int64_t now)
{
    if (depth > RECORD_MAX_DEPTH)
        depth = RECORD_MAX_DEPTH;
    uint64_t h = record_stack_hash(entry, frames, depth);
    struct record_stack_slot *c = record_tc_slot(record_tc.stacks, h);
    struct site *s = c->site;
    struct live *e = record_tc.free;
    uint32_t pool = record_pool_of(a->kind, a->device);
    if (__builtin_expect(s != NULL && e != NULL && c->hash == h &&
                         s->match == site_match(pool, a->kind, a->phase) &&
                         record_stack_equal(c->st, entry, frames, depth), 1)) {
        record_tc.free = (struct live *)e->addr;
        record_tc.nfree--;
        /* a thread that only freed so far has entries but no id yet */
        uint32_t tid = __builtin_expect(record_tc.tid != 0, 1) ? record_tc.tid
                                                               : record_current_tid();
        record_entry_fill(e, a, now, tid);
        record_lock_take(&record_lock);
        record_alloc_locked(a, s, now, tid, e);
        record_lock_drop(&record_lock);
        return;
    }
    /* A copy: were the caller's `a` handed out, it could not live in
     * registers (and its fields, constant at a wrapper, fold away). */
    struct record_alloc copy = *a;
    record_alloc_at_slow(&copy, entry, frames, depth, now, h, pool);
}

/* ---- frees ---- */

/* The kinds a free with hint `want` may take, a bit per kind: one load
 * and a shift on the free path, a constant where the hint is one. */
#define RECORD_KINDS_ALL ((1u << KIND_COUNT) - 1)
#define RECORD_KINDS_TAKEN(want)                                                  \
    ((want) == KIND_COUNT           ? RECORD_KINDS_ALL                            \
     : FORMAT_KIND_ON_HOST(want)    ? FORMAT_KINDS_ON_HOST                        \
                                    : RECORD_KINDS_ALL & ~FORMAT_KINDS_ON_HOST)
_Static_assert(KIND_COUNT < 8, "record_kinds_taken: a byte per hint, a bit per kind");
static const uint8_t record_kinds_taken[8] = {
    RECORD_KINDS_TAKEN(0), RECORD_KINDS_TAKEN(1), RECORD_KINDS_TAKEN(2), RECORD_KINDS_TAKEN(3),
    RECORD_KINDS_TAKEN(4), RECORD_KINDS_TAKEN(5), RECORD_KINDS_TAKEN(6), RECORD_KINDS_TAKEN(7)};

static inline bool record_kind_matches(enum record_kind have, enum record_kind want)
{
    return (record_kinds_taken[(unsigned)want <= KIND_COUNT ? want : KIND_DEVICE] >> have) & 1;
}

extern int64_t record_temporary_window_ns; /* CUMEMTRACE_TEMPORARY (record_set_temporary) */

/* After a free of entry `e` (an identity: not read) at site `s` is
 * accounted: it was `temporary` if nothing was allocated since it or it was
 * freed within the window. */
RECORD_HOT void record_free_note_locked(const struct live *e, struct site *s, bool temporary)
{
    s->s.temporary += temporary;
    record_last_temporary = temporary ? e : NULL;
    record_last_alloc = NULL;
}

/* Whether live entry `e`, freed at `now`, lived no longer than the
 * temporary window (CUMEMTRACE_TEMPORARY; none by default). */
RECORD_HOT bool record_freed_in_window(const struct live *e, int64_t now)
{
    return record_temporary_window_ns > 0 && now - e->t_ns <= record_temporary_window_ns;
}

/* Accounts the free of live entry `e`, whose site is `s`, already out of
 * its table. */
RECORD_HOT void record_free_account_entry_locked(const struct live *e, struct site *s,
                                                 int64_t now)
{
    record_account_free_locked(s, entry_size(e), now);
    record_free_note_locked(e, s, e == record_last_alloc || record_freed_in_window(e, now));
}

/* Frees the live entry `e` at `slot` of the shared live table, whose site
 * is `s`. */
RECORD_HOT void record_free_apply_locked(struct table_slot *slot, struct live *e,
                                         struct site *s, int64_t now)
{
    table_remove(&record_live_table, slot);
    record_free_account_entry_locked(e, s, now);
}

/* record_free_take (record.h), inline. */
RECORD_HOT void *record_free_take_fast(uintptr_t addr, enum record_kind kind_hint,
                                       int64_t now)
{
    record_lock_take(&record_lock);
    struct table_slot *slot = table_find(&record_live_table, addr);
    if (__builtin_expect(slot == NULL, 0))
        return record_free_refused_unlock(false);
    struct live *e = slot->e;
    struct site *s = site_of(e);
    if (__builtin_expect(!record_kind_matches(s->s.kind, kind_hint), 0))
        return record_free_refused_unlock(true);
    record_free_apply_locked(slot, e, s, now);
    record_lock_drop(&record_lock);
    return e;
}

/* record_free_finish(token, true, _) for a token that is not NULL (the
 * wrappers' fast path, which has tested both already), inline: the entry
 * is parked for this thread, no lock. */
RECORD_HOT void record_free_done_fast(void *token)
{
    struct live *e = token;
    e->addr = (uintptr_t)record_tc.free;
    record_tc.free = e;
    if (__builtin_expect(++record_tc.nfree > RECORD_TC_FREE_MAX, 0))
        record_entries_overflow();
}

#pragma GCC visibility pop

#endif
