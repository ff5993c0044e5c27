/* record_rings.c - events by per-thread rings and tables while threads
 * contend for the tracker's lock.
 *
 * Each recording thread may own a ring: a single-producer queue of event
 * rows, and a table of the allocations it made by the ring, under a lock
 * of the ring's own.  An event by the ring does its table work at once,
 * on its own thread, under the ring's lock - an allocation is inserted in
 * its thread's table, a free takes its entry out of whichever table holds
 * it (this thread's first) - and appends a row of what it adds to or
 * takes from the counters: the site, the bytes, the time, the entry as an
 * identity the row never reads through.  Whoever holds record_lock - a
 * thread whose ring is full or that has none, a dump, a view, a stack
 * intern - applies the rows first (record_lock_wait calls
 * record_rings_drain_locked), merged by their times, through the same
 * accounting a direct event runs; the drain touches no table and no
 * entry, so that what threads contend for is counters, not the lines of
 * a table and of entries another core wrote.  Why the figures are a
 * single lock's, peak and all, is record.c's (top of file, "Threads").
 *
 * An event holds its ring's table lock from its table work to its row
 * being appended, and never waits for record_lock while it does (a full
 * ring is seen before the lock is taken); so whoever holds record_lock
 * and then every ring's table lock, and drains once more, sees each
 * table with its rows applied (record_rings_tables_lock_locked: views,
 * context drops, fork).  Lock order: record_lock, then a table lock.
 *
 * Rings are on while the lock word carries LOCK_RINGS (record_impl.h):
 * set by the first event that finds the lock held by another event
 * (RECORD_RINGS_CONTENDED, the default), or by record_set_rings.  Until
 * then nothing here runs: a single-threaded program keeps the direct path
 * and its cost.
 *
 * Threads: a ring's tail and last_t are written by its owner only (the
 * tail released after the row), its head by record_lock's holder only; a
 * row is read by the holder between an acquire of the tail and the
 * release of the head.  A ring's table is guarded by its table lock, the
 * ring table's slots (rings[], nrings) and the rings' `owned` by
 * record_lock - a ring, once published, stays until a fork child's reset,
 * so events read rings[] with an acquire of nrings and no lock.
 */
#include "record_impl.h" /* the tracker's state: one unit with record.c */
#include "record_fast.h"

#include <stdlib.h>

/* 1024 rows (32 KiB) a ring: a thread that records while another holds
 * the lock for a dump fills it only after 1024 events, and threads that
 * record at once drain less often, so less often wait for each other's
 * drain (scripts/bench.py --only threads, 2 threads at depth 32 on 2
 * shared cores: CPU a pair 1.36 x one thread's with 256 rows, 1.21 x with
 * 1024, 1.17 x with 4096).  Up to RECORD_RINGS_MAX rings (64 threads
 * recording at once); later threads take the lock as before. */
#define RING_ROWS 1024

/* A row: what one event adds to or takes from the counters. */
struct ring_row {
    int64_t t;
    const struct live *e; /* compared with record_last_alloc, never read */
    struct site *site;
    uint64_t bytes; /* | the flags below */
};
#define ROW_FREE (UINT64_C(1) << 63)      /* a free (else an allocation) */
#define ROW_TEMPORARY (UINT64_C(1) << 62) /* freed within the temporary window */
#define ROW_DROP (UINT64_C(1) << 61)      /* a live entry replaced at its address */
#define ROW_BYTES SIZE_MASK
_Static_assert((ROW_DROP & SIZE_MASK) == 0, "sizes stay below the row's flags");

struct record_ring {
    /* The owner's line: the tail, and the table its allocations are in
     * (another thread takes the lock for a free of one, or a view). */
    uint32_t tail __attribute__((aligned(64)));
    int table_lock;
    int64_t last_t; /* the owner's: its latest row's time */
    struct addr_table table;
    uint32_t head __attribute__((aligned(64))); /* rows applied: the holder's */
    bool owned; /* under record_lock: a thread has it */
    struct ring_row rows[RING_ROWS] __attribute__((aligned(64)));
};

static struct record_ring *rings[RECORD_RINGS_MAX];
static unsigned nrings; /* written under record_lock, read by acquire */
static enum record_rings_mode rings_mode = RECORD_RINGS_CONTENDED;
static uint64_t rows_applied, rings_full;
/* Whether events' times are a clock's (record_init was given one): the
 * rings order by them, so callers' own times (the unit tests' models,
 * which run them back and forth) keep the lock unless forced. */
bool record_rings_clocked;
/* Given to a thread that found every ring taken: never has room, so the
 * thread takes the lock each time, as before the rings. */
static struct record_ring ring_none = {.tail = RING_ROWS};

static inline struct ring_row *row_at(struct record_ring *r, uint32_t i)
{
    return &r->rows[i % RING_ROWS];
}

static inline unsigned rings_published(void)
{
    return __atomic_load_n(&nrings, __ATOMIC_ACQUIRE);
}

/* A ring's table lock: record_lock's futex mutex, without its drain (only
 * record_lock's wait drains) and without its debug holder. */
static inline void table_lock_take(struct record_ring *r)
{
    int free_state = LOCK_FREE;
    if (!__atomic_compare_exchange_n(&r->table_lock, &free_state, LOCK_OTHER, false,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        record_lock_wait(&r->table_lock);
}

static inline void table_lock_drop(struct record_ring *r)
{
    if (__atomic_exchange_n(&r->table_lock, LOCK_FREE, __ATOMIC_RELEASE) == LOCK_SLEEPERS)
        record_lock_wake(&r->table_lock);
}

/* ---- the owner's side ---- */

/* This thread's ring (ring_mine), got on first use: an unowned one, else a new one
 * (malloc'd outside the lock), else ring_none; NULL when memory is
 * exhausted. */
static __attribute__((noinline, cold)) struct record_ring *ring_get(void)
{
    struct record_ring *r = NULL;
    record_lock_take(&record_lock);
    for (unsigned i = 0; i < nrings && r == NULL; i++)
        if (!rings[i]->owned)
            r = rings[i];
    if (r == NULL && nrings >= RECORD_RINGS_MAX)
        r = &ring_none;
    if (r != NULL && r != &ring_none)
        r->owned = true;
    record_lock_drop(&record_lock);
    if (r == NULL) {
        struct record_ring *fresh = aligned_alloc(64, sizeof *fresh);
        if (fresh == NULL)
            return NULL;
        memset(fresh, 0, sizeof *fresh);
        record_lock_take(&record_lock);
        if (nrings < RECORD_RINGS_MAX) {
            fresh->owned = true;
            __atomic_store_n(&rings[nrings], fresh, __ATOMIC_RELAXED);
            __atomic_store_n(&nrings, nrings + 1, __ATOMIC_RELEASE);
            r = fresh;
        } else {
            r = &ring_none;
        }
        record_lock_drop(&record_lock);
        if (r != fresh)
            free(fresh);
    }
    return record_tc.ring = r;
}

static inline struct record_ring *ring_mine(void)
{
    struct record_ring *r = record_tc.ring;
    return __builtin_expect(r != NULL, 1) ? r : ring_get();
}

/* Whether `n` more rows fit (ring_none: never). */
static inline bool ring_room(struct record_ring *r, uint32_t n)
{
    uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
    return tail - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) <= RING_ROWS - n;
}

/* Appends a row; ring_room said it fits (only the owner appends, and a
 * drain only makes room). */
static void ring_push(struct record_ring *r, int64_t t, const struct live *e, struct site *s,
                      uint64_t bytes)
{
    uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
    /* a ring's rows in time order, whatever a caller passes: the drain
     * takes each ring's rows up to a time in order (its merge) */
    if (t < r->last_t)
        t = r->last_t;
    r->last_t = t;
    *row_at(r, tail) = (struct ring_row){t, e, s, bytes};
    __atomic_store_n(&r->tail, tail + 1, __ATOMIC_RELEASE);
}

/* The lock was held when an event tried it, rings off: if by another event
 * and contention switches them on, they go on now (under the lock, so no
 * direct holder is inside).  Takes the lock either way. */
static void lock_take_contended(int seen)
{
    record_lock_take(&record_lock);
    int state = seen & LOCK_STATE;
    if (!(seen & LOCK_RINGS) && (state == LOCK_EVENT || state == LOCK_SLEEPERS) &&
        __atomic_load_n(&rings_mode, __ATOMIC_RELAXED) == RECORD_RINGS_CONTENDED &&
        record_rings_clocked)
        __atomic_fetch_or(&record_lock, LOCK_RINGS, __ATOMIC_RELAXED);
}

/* The allocation of filled entry `e` at site `s` into this thread's table,
 * and its row (room for two was seen); false when the table cannot grow. */
static bool ring_alloc(struct record_ring *r, struct site *s, struct live *e)
{
    table_lock_take(r);
    struct table_slot *slot = table_slot(&r->table, e->addr);
    if (slot == NULL) {
        table_lock_drop(r);
        return false;
    }
    e->site = s->index;
    if (slot->e == NULL) {
        slot->key = e->addr;
        r->table.count++;
    } else {
        /* still live at this address (freed behind our back): it goes, as
         * record_alloc_replace_locked drops it; parked here, since giving
         * entries back takes record_lock, not to be waited for now */
        struct live *old = slot->e;
        ring_push(r, e->t_ns, old, site_of(old), entry_size(old) | ROW_FREE | ROW_DROP);
        old->addr = (uintptr_t)record_tc.free;
        record_tc.free = old;
        record_tc.nfree++;
    }
    slot->e = e;
    ring_push(r, e->t_ns, e, s, entry_size(e));
    table_lock_drop(r);
    return true;
}

/* What record_alloc_locked needs of an allocation whose entry `e` is
 * filled: a filled entry is never replaced, so only these fields count. */
static inline struct record_alloc alloc_of(const struct live *e, const struct site *s,
                                           bool is_handle)
{
    return (struct record_alloc){.addr = e->addr, .size = entry_size(e),
                                 .requested = entry_size(e), .kind = s->s.kind,
                                 .is_handle = is_handle};
}

void record_alloc_contended(struct site *s, struct live *e, bool is_handle)
{
    int seen = __atomic_load_n(&record_lock, __ATOMIC_RELAXED);
    if (seen & LOCK_RINGS) {
        struct record_ring *r = is_handle ? NULL : ring_mine();
        bool room = r != NULL && ring_room(r, 2);
        if (room && ring_alloc(r, s, e))
            return;
        record_lock_take(&record_lock);
        rings_full += r != NULL && r != &ring_none && !room;
    } else {
        lock_take_contended(seen);
    }
    struct record_alloc a = alloc_of(e, s, is_handle);
    record_alloc_locked(&a, s, e->t_ns, 0, e);
    record_lock_drop(&record_lock);
}

/* Takes the entry of `addr` out of ring `from`'s table, its row on this
 * thread's ring `r` (room for one was seen): 1 taken (*out), 0 not there,
 * -1 there but of another kind than `hint` takes. */
static int ring_take(struct record_ring *r, struct record_ring *from, uintptr_t addr,
                     enum record_kind hint, int64_t now, struct live **out)
{
    table_lock_take(from);
    struct table_slot *slot = table_find(&from->table, addr);
    if (slot == NULL) {
        table_lock_drop(from);
        return 0;
    }
    struct live *e = slot->e;
    struct site *s = site_of(e);
    if (!record_kind_matches(s->s.kind, hint)) {
        table_lock_drop(from);
        return -1;
    }
    table_remove(&from->table, slot);
    ring_push(r, now, e, s,
              entry_size(e) | ROW_FREE | (record_freed_in_window(e, now) ? ROW_TEMPORARY : 0));
    table_lock_drop(from);
    *out = e;
    return 1;
}

void *record_free_take_contended(uintptr_t addr, enum record_kind kind_hint, int64_t now)
{
    int seen = __atomic_load_n(&record_lock, __ATOMIC_RELAXED);
    bool searched = false; /* the rings' tables: the entry is in none */
    if (seen & LOCK_RINGS) {
        struct record_ring *r = ring_mine();
        bool room = r != NULL && ring_room(r, 1);
        if (room) {
            /* this thread's table first: most memory is freed by the
             * thread that allocated it */
            struct live *e = NULL;
            int got = ring_take(r, r, addr, kind_hint, now, &e);
            for (unsigned i = 0, n = rings_published(); got == 0 && i < n; i++) {
                struct record_ring *from = __atomic_load_n(&rings[i], __ATOMIC_RELAXED);
                if (from != r)
                    got = ring_take(r, from, addr, kind_hint, now, &e);
            }
            if (got > 0)
                return e;
            record_lock_take(&record_lock);
            if (got < 0)
                return record_free_refused_unlock(true);
            searched = true; /* the shared table's, then, under the lock */
        } else {
            record_lock_take(&record_lock);
            rings_full += r != NULL && r != &ring_none;
        }
    } else {
        lock_take_contended(seen);
    }
    struct table_slot *slot = table_find(&record_live_table, addr);
    if (slot == NULL)
        return searched ? record_free_refused_unlock(false)
                        : record_free_missed_unlock(addr, kind_hint, now);
    struct live *e = slot->e;
    struct site *s = site_of(e);
    if (!record_kind_matches(s->s.kind, kind_hint))
        return record_free_refused_unlock(true);
    record_free_apply_locked(slot, e, s, now);
    record_lock_drop(&record_lock);
    return e;
}

/* ---- record_lock's holder's side ---- */

struct live *record_rings_take_locked(uintptr_t addr, enum record_kind hint, bool *known)
{
    RECORD_ASSERT_LOCKED();
    *known = false;
    for (unsigned i = 0; i < nrings; i++) {
        struct record_ring *from = rings[i];
        table_lock_take(from);
        struct table_slot *slot = table_find(&from->table, addr);
        struct live *e = slot != NULL ? slot->e : NULL;
        if (e != NULL && !record_kind_matches(site_of(e)->s.kind, hint)) {
            table_lock_drop(from);
            *known = true;
            return NULL;
        }
        if (e != NULL)
            table_remove(&from->table, slot);
        table_lock_drop(from);
        if (e != NULL) {
            /* its row was appended before the insert's unlock: applied
             * now, before this free is accounted */
            record_rings_drain_locked();
            return e;
        }
    }
    return NULL;
}

void record_rings_tables_lock_locked(void)
{
    RECORD_ASSERT_LOCKED();
    for (unsigned i = 0; i < nrings; i++)
        table_lock_take(rings[i]);
    /* what events appended between the lock's drain and their tables' locks */
    record_rings_drain_locked();
}

void record_rings_tables_unlock_locked(void)
{
    RECORD_ASSERT_LOCKED();
    for (unsigned i = 0; i < nrings; i++)
        table_lock_drop(rings[i]);
}

unsigned record_live_tables_locked(struct addr_table *out[1 + RECORD_RINGS_MAX])
{
    RECORD_ASSERT_LOCKED();
    unsigned n = 0;
    out[n++] = &record_live_table;
    for (unsigned i = 0; i < nrings; i++)
        out[n++] = &rings[i]->table;
    return n;
}

static void apply_locked(const struct ring_row *row)
{
    uint64_t bytes = row->bytes & ROW_BYTES;
    if (!(row->bytes & ROW_FREE)) {
        record_account_alloc_locked(row->site, bytes, row->t);
        record_last_alloc = row->e;
    } else if (row->bytes & ROW_DROP) {
        record_account_free_locked(row->site, bytes, row->t);
    } else {
        record_account_free_locked(row->site, bytes, row->t);
        record_free_note_locked(row->e, row->site,
                                row->e == record_last_alloc || (row->bytes & ROW_TEMPORARY));
    }
}

void record_rings_drain_locked(void)
{
    RECORD_ASSERT_LOCKED();
    unsigned n = nrings;
    uint32_t head[RECORD_RINGS_MAX], tail[RECORD_RINGS_MAX];
    /* First look: the latest time of any row written so far is the cut.
     * Every row written before that row's time was read is visible to
     * the second look, which takes each ring's rows up to the cut. */
    bool any = false;
    int64_t cut = INT64_MIN;
    for (unsigned i = 0; i < n; i++) {
        head[i] = __atomic_load_n(&rings[i]->head, __ATOMIC_RELAXED);
        uint32_t t = __atomic_load_n(&rings[i]->tail, __ATOMIC_ACQUIRE);
        if (t != head[i]) {
            any = true;
            if (row_at(rings[i], t - 1)->t > cut)
                cut = row_at(rings[i], t - 1)->t;
        }
    }
    if (!any)
        return;
    for (unsigned i = 0; i < n; i++)
        tail[i] = __atomic_load_n(&rings[i]->tail, __ATOMIC_ACQUIRE);
    /* Merged by time (each ring's rows are in its thread's order): the
     * ring with the earliest row applies its rows up to the next ring's
     * earliest, a run at a time - one ring alone is one run. */
    unsigned active[RECORD_RINGS_MAX], nactive = 0;
    for (unsigned i = 0; i < n; i++)
        if (head[i] != tail[i] && row_at(rings[i], head[i])->t <= cut)
            active[nactive++] = i;
    record_applying_rows = true;
    while (nactive > 0) {
        unsigned best = 0;
        int64_t next = cut;
        for (unsigned j = 1; j < nactive; j++) {
            int64_t t = row_at(rings[active[j]], head[active[j]])->t;
            int64_t best_t = row_at(rings[active[best]], head[active[best]])->t;
            if (t < best_t) {
                next = best_t < next ? best_t : next;
                best = j;
            } else if (t < next) {
                next = t;
            }
        }
        unsigned i = active[best];
        uint32_t from = head[i];
        do {
            apply_locked(row_at(rings[i], head[i]));
            head[i]++;
        } while (head[i] != tail[i] && row_at(rings[i], head[i])->t <= next);
        rows_applied += head[i] - from;
        if (head[i] == tail[i] || row_at(rings[i], head[i])->t > cut)
            active[best] = active[--nactive];
    }
    record_applying_rows = false;
    for (unsigned i = 0; i < n; i++)
        __atomic_store_n(&rings[i]->head, head[i], __ATOMIC_RELEASE);
}

void record_rings_thread_end(void)
{
    struct record_ring *r = record_tc.ring;
    if (r == NULL)
        return;
    record_tc.ring = NULL;
    if (r == &ring_none)
        return;
    /* its table keeps the allocations this thread made: any thread frees
     * them, and the next owner adds to it */
    record_lock_take(&record_lock); /* applies this thread's rows */
    r->owned = false;
    record_lock_drop(&record_lock);
}

void record_rings_reset_locked(void)
{
    RECORD_ASSERT_LOCKED();
    /* the parent's threads are not in this process; their rows were
     * drained by the fork's prepare (record_atfork_prepare), whose table
     * locks this child holds: the rings go with their tables (the
     * entries are the slabs', freed by the caller) */
    for (unsigned i = 0; i < nrings; i++) {
        table_clear(&rings[i]->table);
        free(rings[i]);
    }
    nrings = 0;
    rows_applied = rings_full = 0;
}

/* The rings go off: their tables' entries move to the shared table, so
 * that the direct path, which looks there only, finds every one. */
static void tables_merge_locked(int64_t now)
{
    for (unsigned i = 0; i < nrings; i++) {
        struct addr_table *t = &rings[i]->table;
        for (uint32_t j = 0; j < table_size(t); j++) {
            struct live *e = t->slots[j].e;
            if (e == NULL)
                continue;
            if (!table_add(&record_live_table, e->addr, e)) {
                /* no memory to keep it: forgotten as freed, not left unfindable */
                record_account_free_locked(site_of(e), entry_size(e), now);
                record_entry_free_locked(e);
            }
        }
        table_clear(t);
    }
}

void record_set_rings(enum record_rings_mode mode)
{
    record_lock_all(); /* drains: no other thread records */
    if (mode != RECORD_RINGS_NOW)
        tables_merge_locked(event_log_cursor.last_stamp);
    record_rings_tables_unlock_locked();
    __atomic_store_n(&rings_mode, mode, __ATOMIC_RELAXED);
    RECORD_HOLDER_SET(NULL);
    int v = __atomic_exchange_n(&record_lock, mode == RECORD_RINGS_NOW ? LOCK_RINGS : LOCK_FREE,
                                __ATOMIC_RELEASE);
    if ((v & LOCK_STATE) == LOCK_SLEEPERS)
        record_lock_wake(&record_lock);
}

/* The lock word a fork child starts with: rings on only when forced. */
int record_rings_child_lock(void)
{
    return __atomic_load_n(&rings_mode, __ATOMIC_RELAXED) == RECORD_RINGS_NOW ? LOCK_RINGS : 0;
}

void record_rings_counts(uint64_t *rows, uint64_t *full)
{
    record_lock_take(&record_lock);
    if (rows != NULL)
        *rows = rows_applied;
    if (full != NULL)
        *full = rings_full;
    record_lock_drop(&record_lock);
}
