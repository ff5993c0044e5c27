/* event_log.c - the bounded, time-ordered log of allocations and frees.
 *
 * Workload: one push per allocation and per free, on the host's allocation
 * path, under the tracker's lock (every function here assumes it is held);
 * a copy per dump.
 *
 * Order: rows are in lock order, and event_log_stamp (under that same
 * lock) makes their times non-decreasing: a caller reads its clock just
 * before the lock, and a time older than the previous row's - the caller
 * waited for the lock while another thread logged, or the TSC stepped back
 * a little - becomes the previous row's.  So no clock is read inside the
 * critical section, except for a caller late by more than
 * EVENT_LOG_LATE_NS (preempted in between), re-stamped with the clock.
 *
 * Cost: the common push is a few stores into the cursor's row
 * (event_log_add, inline): `fast_end` folds every condition of the slow
 * path - growing, faulting in, thinning, failure, no bound - into one
 * compare, recomputed whenever one of them changes.
 *
 * Memory: grown on demand.  The rows live in one anonymous mapping that
 * starts at INITIAL_ROWS and doubles (mremap, no copy) up to the cap, and is
 * pre-faulted PREFAULT_BYTES ahead of the last row, so the allocation path
 * neither takes a page fault per 128 rows nor pays for a large cap it never
 * fills.  Growth that fails lowers the cap to what is mapped.
 *
 * Thinning: when the log is full, time is cut into buckets of 2^shift ns and
 * each bucket keeps, per pool, only the first row with the lowest `current`
 * and the first with the highest.  Extrema do not depend on the phase of a
 * periodic workload (keeping every k-th event does: alloc/free pairs with an
 * even k keep only allocations), so both sides of every oscillation, the
 * peak and the troughs survive.  `shift` is the smallest that brings the log
 * to at most half the cap.  Since the extrema of a union of buckets are among
 * the extrema of its parts, thinning what is kept equals thinning every event
 * ever pushed; new rows of the latest bucket replace its extrema in place.
 * Every kept row is an event as it happened: `current` is exact.
 */
#include "event_log.h"

#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* 256 KiB: the first mapping, and how far ahead of the last row pages are
 * faulted in (64 pages at a time: a few microseconds per 8192 rows). */
#define INITIAL_ROWS 8192
#define PREFAULT_BYTES (256u << 10)
#define POOL_SLOTS (RECORD_EVENT_POOLS) /* row pool -1..63 -> slot 0..64 */

struct event_log_cursor event_log_cursor;
/* rows, nrows, recorded and last_stamp live in the cursor */
static struct event_log_cursor *const cur = &event_log_cursor;
static size_t cap;       /* the bound on rows */
static size_t mapped;    /* rows the mapping holds */
static size_t faulted;   /* rows known to be backed by memory */
static size_t open_start; /* first row of the latest bucket (when thinned) */
/* What the latest bucket holds for each pool (slot), while `gen` equals
 * open_gen: the values of its lowest and highest rows (one: a single row).
 * A thinned push whose value lies between them changes nothing - most of a
 * long run's pushes - and is told so without a scan of the bucket. */
static struct {
    uint64_t lo, hi, gen;
    bool one;
} open_ext[POOL_SLOTS];
static uint64_t open_gen = 1; /* bumped whenever the latest bucket is another */
static int shift = -1;    /* -1: nothing thinned; else bucket = t >> shift */
static bool failed, populate_off;
static int64_t (*clock_fn)(void);

/* Recomputes the fast path's bound: below it a push needs no check. */
static void refresh(void)
{
    size_t end = faulted < mapped ? faulted : mapped;
    if (end > cap)
        end = cap;
    event_log_cursor.fast_end = shift < 0 && !failed ? end : 0;
}

void event_log_init(size_t c, int64_t (*clock)(void))
{
    cap = c;
    clock_fn = clock;
    refresh();
}

int64_t event_log_stamp_late(int64_t now)
{
    if (clock_fn != NULL && cur->last_stamp - now > EVENT_LOG_LATE_NS)
        now = clock_fn();
    if (now < cur->last_stamp)
        now = cur->last_stamp;
    cur->last_stamp = now;
    return now;
}

static size_t page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

/* Faults in the next PREFAULT_BYTES beyond `faulted`.  Best effort: where
 * MADV_POPULATE_WRITE is unknown (Linux < 5.14) pages fault on first use. */
static void prefault(void)
{
    size_t per = PREFAULT_BYTES / sizeof *cur->rows;
    size_t end = faulted + per < mapped ? faulted + per : mapped;
#ifdef MADV_POPULATE_WRITE
    if (!populate_off) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        uintptr_t a = (uintptr_t)(cur->rows + faulted) / page * page;
        uintptr_t b = (uintptr_t)(cur->rows + end);
        if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) != 0)
            populate_off = true;
    }
#endif
    faulted = end;
}

/* Makes room for one more row below `cap`; false when memory ran out. */
static bool grow(void)
{
    if (cur->rows == NULL) {
        size_t n = cap < INITIAL_ROWS ? cap : INITIAL_ROWS;
        void *m = mmap(NULL, page_round(n * sizeof *cur->rows), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            failed = true;
            return false;
        }
        cur->rows = m;
        mapped = n;
        return true;
    }
    size_t n = mapped * 2 < cap ? mapped * 2 : cap;
    void *m = mremap(cur->rows, page_round(mapped * sizeof *cur->rows),
                     page_round(n * sizeof *cur->rows), MREMAP_MAYMOVE);
    if (m == MAP_FAILED) {
        cap = mapped; /* keep what we have; thinning takes over from here */
        return false;
    }
    cur->rows = m;
    mapped = n;
    return true;
}

static uint64_t bucket_of(int64_t t, int s)
{
    return (t < 0 ? 0 : (uint64_t)t) >> s;
}

static unsigned slot_of(const struct record_event *e)
{
    unsigned s = (unsigned)(e->pool + 1);
    return s < POOL_SLOTS ? s : POOL_SLOTS - 1;
}

/* One pass over the log with buckets of 2^s ns: returns how many rows the
 * extrema selection keeps, and keeps only those when `apply`. */
static size_t select_pass(int s, bool apply)
{
    static size_t lo[POOL_SLOTS], hi[POOL_SLOTS];
    static bool seen[POOL_SLOTS];
    size_t w = 0, i = 0, last_start = 0;
    while (i < cur->nrows) {
        uint64_t b = bucket_of(cur->rows[i].t_ns, s);
        size_t j = i;
        for (; j < cur->nrows && bucket_of(cur->rows[j].t_ns, s) == b; j++) {
            unsigned p = slot_of(&cur->rows[j]);
            if (!seen[p]) {
                seen[p] = true;
                lo[p] = hi[p] = j;
            } else if (cur->rows[j].current < cur->rows[lo[p]].current) {
                lo[p] = j;
            } else if (cur->rows[j].current > cur->rows[hi[p]].current) {
                hi[p] = j;
            }
        }
        last_start = w;
        for (size_t r = i; r < j; r++) {
            unsigned p = slot_of(&cur->rows[r]);
            if (r == lo[p] || r == hi[p]) {
                if (apply)
                    cur->rows[w] = cur->rows[r]; /* w <= r: never overwrites unread rows */
                w++;
            }
        }
        for (size_t r = i; r < j; r++)
            seen[slot_of(&cur->rows[r])] = false;
        i = j;
    }
    if (apply) {
        cur->nrows = w;
        open_start = last_start;
        open_gen++;
        shift = s;
    }
    return w;
}

/* The log is full: coarsen the buckets until at most half the cap is used.
 * The count never grows as buckets get coarser.  The first time, a binary
 * search counts (without applying) for the smallest bucket that does; from
 * then on, since thinning what is kept equals thinning every event (see
 * the top), each coarser bucket is applied to the rows in turn until one
 * does - the same smallest bucket, usually the first or second tried (a
 * log refilled at a steady rate about halves with buckets twice as wide):
 * one or two passes where the search took seven, under the tracker's lock. */
static void thin(void)
{
    if (shift >= 0) {
        for (int s = shift < 63 ? shift + 1 : 63;; s++) {
            select_pass(s, true);
            if (cur->nrows <= cap / 2 || s == 63)
                return;
        }
    }
    int lo = 0, hi = 63;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (select_pass(mid, false) <= cap / 2)
            hi = mid;
        else
            lo = mid + 1;
    }
    select_pass(lo, true);
}

/* The caller made sure a mapped row is free. */
static void append(const struct record_event *ev)
{
    if (cur->nrows >= faulted)
        prefault();
    cur->rows[cur->nrows++] = *ev;
}

static void remove_row(size_t i)
{
    memmove(&cur->rows[i], &cur->rows[i + 1], (cur->nrows - i - 1) * sizeof *cur->rows);
    cur->nrows--;
}

/* Thinned: `ev` joins the latest bucket if it falls in it, replacing the
 * extremum of its pool that it beats (ties keep the first). */
static void push_thinned(const struct record_event *ev)
{
    unsigned p = slot_of(ev);
    if (cur->nrows == 0 ||
        bucket_of(cur->rows[cur->nrows - 1].t_ns, shift) != bucket_of(ev->t_ns, shift)) {
        open_gen++;
        if (cur->nrows < cap) {
            open_start = cur->nrows;
            append(ev);
            open_ext[p].lo = open_ext[p].hi = ev->current;
            open_ext[p].one = true;
            open_ext[p].gen = open_gen;
        }
        return;
    }
    size_t lo = SIZE_MAX, hi = SIZE_MAX;
    for (size_t i = open_start; i < cur->nrows; i++) {
        if (cur->rows[i].pool != ev->pool)
            continue;
        if (lo == SIZE_MAX || cur->rows[i].current < cur->rows[lo].current)
            lo = i;
        if (hi == SIZE_MAX || cur->rows[i].current > cur->rows[hi].current)
            hi = i;
    }
    uint64_t lo_v = lo == SIZE_MAX ? ev->current : cur->rows[lo].current;
    uint64_t hi_v = lo == SIZE_MAX ? ev->current : cur->rows[hi].current;
    bool one = lo == hi;
    if (lo == SIZE_MAX || (lo == hi && ev->current != lo_v)) {
        if (cur->nrows < cap) {
            append(ev); /* a new pool, or the bucket's other extremum */
            if (lo != SIZE_MAX) {
                lo_v = ev->current < lo_v ? ev->current : lo_v;
                hi_v = ev->current > hi_v ? ev->current : hi_v;
            }
            one = lo == SIZE_MAX;
        } else if (lo == SIZE_MAX) {
            open_ext[p].gen = 0; /* not in the bucket after all */
            return;
        }
    } else if (ev->current > hi_v) {
        remove_row(hi); /* lo != hi here */
        append(ev);
        hi_v = ev->current;
    } else if (ev->current < lo_v) {
        remove_row(lo);
        append(ev);
        lo_v = ev->current;
    }
    open_ext[p].lo = lo_v;
    open_ext[p].hi = hi_v;
    open_ext[p].one = one;
    open_ext[p].gen = open_gen;
}

/* Thinned, and `ev` falls in the latest bucket between its pool's extrema
 * there (or on its single row): keeping it would change nothing. */
static bool open_unchanged(const struct record_event *ev)
{
    unsigned p = (unsigned)(ev->pool + 1);
    if (p >= POOL_SLOTS || open_ext[p].gen != open_gen || cur->nrows == 0 ||
        bucket_of(cur->rows[cur->nrows - 1].t_ns, shift) != bucket_of(ev->t_ns, shift))
        return false;
    return open_ext[p].one ? ev->current == open_ext[p].lo
                           : ev->current >= open_ext[p].lo && ev->current <= open_ext[p].hi;
}

/* event_log_add's other cases: growing, faulting in, thinning, full. */
static void event_log_push_slow(const struct record_event *ev)
{
    if (cap == 0)
        return;
    cur->recorded++;
    if (shift >= 0 && cur->nrows < cap && open_unchanged(ev))
        return;
    if (cur->nrows == mapped && mapped < cap)
        grow(); /* may lower the cap to what is mapped */
    if (!failed) {
        if (cur->nrows >= cap)
            thin();
        if (shift < 0)
            append(ev);
        else
            push_thinned(ev);
    }
    refresh();
}

void event_log_add_slow(int64_t t, int64_t delta, uint64_t current, uint64_t tag)
{
    struct record_event ev = {.t_ns = t, .delta = delta, .current = current};
    memcpy((char *)&ev + RECORD_EVENT_TAG_AT, &tag, sizeof tag);
    event_log_push_slow(&ev);
}

struct event_log_stats event_log_stats(void)
{
    struct event_log_stats s = {cap, cur->nrows, cur->recorded,
                                shift < 0 ? 0 : UINT64_C(1) << shift};
    return s;
}

void event_log_copy(struct record_event *out, size_t from)
{
    if (cur->nrows > from)
        memcpy(out, cur->rows + from, (cur->nrows - from) * sizeof *cur->rows);
}

void event_log_copy_range(struct record_event *out, size_t from, size_t n)
{
    if (from >= cur->nrows)
        return;
    if (n > cur->nrows - from)
        n = cur->nrows - from;
    if (n > 0)
        memcpy(out, cur->rows + from, n * sizeof *cur->rows);
}

size_t event_log_fresh_from(uint64_t recorded, int64_t last_t_ns)
{
    if (recorded == 0)
        return 0;
    if (shift < 0 && cur->recorded >= recorded) {
        uint64_t fresh = cur->recorded - recorded;
        return fresh < cur->nrows ? cur->nrows - (size_t)fresh : 0;
    }
    /* times are non-decreasing: the first row stamped after last_t_ns */
    size_t lo = 0, hi = cur->nrows;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cur->rows[mid].t_ns <= last_t_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void event_log_reset(void)
{
    if (cur->rows != NULL)
        munmap(cur->rows, page_round(mapped * sizeof *cur->rows));
    cur->rows = NULL;
    cur->nrows = mapped = faulted = open_start = 0;
    open_gen++;
    cur->recorded = 0;
    shift = -1;
    failed = populate_off = false;
    cur->last_stamp = 0;
    refresh();
}

size_t event_log_machine_cap(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return SIZE_MAX;
    /* an eighth of memory: the log, the dump's copy of it and the host */
    return (size_t)pages / 8 * ((size_t)page / sizeof *cur->rows);
}
