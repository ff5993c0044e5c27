/* record_rings.c - events by per-thread rings while threads contend for
 * the tracker's lock.
 *
 * Each recording thread may own one single-producer ring of event rows
 * (an allocation: its filled entry and site; a free: its address and kind
 * hint).  The owner appends without the lock; whoever holds the lock - a
 * thread whose ring is full or that has none, a dump, a view, a stack
 * intern - applies the rows first (record_lock_wait calls
 * record_rings_drain_locked), merged by their times, through the same
 * *_locked code a direct event runs.  Why the result is a single lock's,
 * peak and all, is record.c's (top of file, "Threads").
 *
 * Rings are on while the lock word carries LOCK_RINGS (record_impl.h):
 * set by the first event that finds the lock held by another event
 * (RECORD_RINGS_CONTENDED, the default), or by record_set_rings.  Until
 * then nothing here runs: a single-threaded program keeps the direct path
 * and its cost.
 *
 * Threads: a ring's tail is written by its owner only (release after the
 * row), its head and `taken` by the lock's holder only; a row is read by
 * the holder between an acquire of the tail and the release of the head.
 * The ring table and its flags are guarded by record_lock.
 */
#include "record_impl.h" /* the tracker's state: one unit with record.c */
#include "record_fast.h"

#include <stdlib.h>

/* 256 rows (8 KiB) a ring: a thread that records while another holds the
 * lock for a dump fills it only after 256 events; up to 64 rings (64
 * threads recording at once), later threads take the lock as before. */
#define RING_ROWS 256
#define RINGS_MAX 64

/* An allocation (site not NULL: `what` is its filled entry) or a free
 * (site NULL: `what` is its address, `hint` its kind hint). */
struct ring_row {
    int64_t t;
    uintptr_t what;
    struct site *site;
    uint32_t hint;
};

struct record_ring {
    uint32_t tail __attribute__((aligned(64))); /* rows appended: the owner's */
    int64_t last_t; /* the owner's: its latest row's time */
    uint32_t head __attribute__((aligned(64))); /* rows applied: the holder's */
    /* Under the lock: the entry the latest applied free row took, kept
     * until the next one - a failed real free puts it back (record.c,
     * free_undo) - and whether a thread owns the ring. */
    struct live *taken;
    bool owned;
    struct ring_row rows[RING_ROWS] __attribute__((aligned(64)));
};

static struct record_ring *rings[RINGS_MAX];
static unsigned nrings;
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
    if (r == NULL && nrings >= RINGS_MAX)
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
        if (nrings < RINGS_MAX) {
            fresh->owned = true;
            r = rings[nrings++] = fresh;
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

/* Appends a row: false when the ring is full. */
static bool ring_push(struct record_ring *r, int64_t t, uintptr_t what, struct site *s,
                      uint32_t hint)
{
    uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
    if (tail - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) >= RING_ROWS)
        return false;
    /* a ring's rows in time order, whatever a caller passes: the drain
     * takes each ring's rows up to a time in order (its merge) */
    if (t < r->last_t)
        t = r->last_t;
    r->last_t = t;
    *row_at(r, tail) = (struct ring_row){t, what, s, hint};
    __atomic_store_n(&r->tail, tail + 1, __ATOMIC_RELEASE);
    return true;
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
        if (r != NULL && ring_push(r, e->t_ns, (uintptr_t)e, s, 0))
            return;
        record_lock_take(&record_lock);
        rings_full += r != NULL && r != &ring_none;
    } else {
        lock_take_contended(seen);
    }
    struct record_alloc a = alloc_of(e, s, is_handle);
    record_alloc_locked(&a, s, e->t_ns, 0, e);
    record_lock_drop(&record_lock);
}

void *record_free_take_contended(uintptr_t addr, enum record_kind kind_hint, int64_t now)
{
    int seen = __atomic_load_n(&record_lock, __ATOMIC_RELAXED);
    if (seen & LOCK_RINGS) {
        /* The token is a parked entry of this thread standing in for the
         * one the row will take: finished as any (parked again on
         * success; a failure asks the lock for the real one). */
        struct record_ring *r = ring_mine();
        struct live *stand_in = record_tc.free;
        if (r != NULL && stand_in != NULL && ring_push(r, now, addr, NULL, kind_hint)) {
            record_tc.free = (struct live *)stand_in->addr;
            record_tc.nfree--;
            stand_in->site = RECORD_RING_TOKEN;
            stand_in->addr = addr; /* whose entry it stands for */
            return stand_in;
        }
        record_lock_take(&record_lock);
        rings_full += r != NULL && r != &ring_none && stand_in != NULL;
    } else {
        lock_take_contended(seen);
    }
    struct table_slot *slot = table_find(&record_live_table, addr);
    if (slot == NULL)
        return record_free_refused_unlock(false);
    struct live *e = slot->e;
    struct site *s = site_of(e);
    if (!record_kind_matches(s->s.kind, kind_hint))
        return record_free_refused_unlock(true);
    record_free_apply_locked(slot, e, s, now);
    record_lock_drop(&record_lock);
    return e;
}

/* ---- the lock holder's side ---- */

static void apply_locked(struct record_ring *r, const struct ring_row *row)
{
    if (row->site != NULL) {
        struct live *e = (struct live *)row->what;
        struct record_alloc a = alloc_of(e, row->site, false);
        record_alloc_locked(&a, row->site, row->t, 0, e);
        return;
    }
    struct table_slot *slot = table_find(&record_live_table, row->what);
    struct live *e = NULL;
    if (slot == NULL) {
        record_totals.unknown_frees++;
    } else if (!record_kind_matches(site_of(slot->e)->s.kind, (enum record_kind)row->hint)) {
        record_totals.wrong_kind_frees++;
    } else {
        e = slot->e;
        record_free_apply_locked(slot, e, site_of(e), row->t);
    }
    if (r->taken != NULL)
        record_entry_free_locked(r->taken);
    r->taken = e;
}

void record_rings_drain_locked(void)
{
    RECORD_ASSERT_LOCKED();
    unsigned n = nrings;
    uint32_t head[RINGS_MAX], tail[RINGS_MAX];
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
    unsigned active[RINGS_MAX], nactive = 0;
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
            apply_locked(rings[i], row_at(rings[i], head[i]));
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

struct live *record_rings_taken_locked(const struct live *stand_in, bool take)
{
    RECORD_ASSERT_LOCKED();
    struct record_ring *r = record_tc.ring;
    /* another free of this thread's since (a signal handler's, during the
     * real free) took its place: that entry is not this token's */
    if (r == NULL || r == &ring_none || r->taken == NULL || r->taken->addr != stand_in->addr)
        return NULL;
    struct live *e = r->taken;
    if (take)
        r->taken = NULL;
    return e;
}

void record_rings_thread_end(void)
{
    struct record_ring *r = record_tc.ring;
    if (r == NULL)
        return;
    record_tc.ring = NULL;
    if (r == &ring_none)
        return;
    record_lock_take(&record_lock); /* applies this thread's rows */
    if (r->taken != NULL)
        record_entry_free_locked(r->taken);
    r->taken = NULL;
    r->owned = false;
    record_lock_drop(&record_lock);
}

void record_rings_reset_locked(void)
{
    RECORD_ASSERT_LOCKED();
    /* the parent's threads are not in this process; their rows were
     * drained by the fork's prepare (record_atfork_prepare) */
    for (unsigned i = 0; i < nrings; i++)
        free(rings[i]);
    nrings = 0;
    rows_applied = rings_full = 0;
}

void record_set_rings(enum record_rings_mode mode)
{
    record_lock_take(&record_lock); /* drains: no other thread records */
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
