/* event_log.c - the bounded, time-ordered log of allocations and frees.
 *
 * Workload: one push per allocation and per free, on the host's allocation
 * path, under the tracker's lock (every function here assumes it is held);
 * a copy per dump.
 *
 * Order: a row's time is taken by event_log_stamp under that same lock, so
 * rows are in lock order and their times never decrease (a time taken
 * before the lock would let a thread preempted in between write an older
 * time after a newer one).  The stamp is also clamped to the previous one,
 * which absorbs the sub-microsecond steps a TSC-based clock can make.
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

static struct record_event *rows;
static size_t cap;       /* the bound on rows */
static size_t nrows;     /* rows held */
static size_t mapped;    /* rows the mapping holds */
static size_t faulted;   /* rows known to be backed by memory */
static size_t open_start; /* first row of the latest bucket (when thinned) */
static uint64_t recorded;
static int shift = -1;    /* -1: nothing thinned; else bucket = t >> shift */
static bool failed, populate_off;
static int64_t last_stamp;
static int64_t (*clock_fn)(void);

void event_log_init(size_t c, int64_t (*clock)(void))
{
    cap = c;
    clock_fn = clock;
}

int64_t event_log_stamp(int64_t now)
{
    if (clock_fn != NULL)
        now = clock_fn();
    if (now < last_stamp)
        now = last_stamp;
    last_stamp = now;
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
    size_t per = PREFAULT_BYTES / sizeof *rows;
    size_t end = faulted + per < mapped ? faulted + per : mapped;
#ifdef MADV_POPULATE_WRITE
    if (!populate_off) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        uintptr_t a = (uintptr_t)(rows + faulted) / page * page;
        uintptr_t b = (uintptr_t)(rows + end);
        if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) != 0)
            populate_off = true;
    }
#endif
    faulted = end;
}

/* Makes room for one more row below `cap`; false when memory ran out. */
static bool grow(void)
{
    if (rows == NULL) {
        size_t n = cap < INITIAL_ROWS ? cap : INITIAL_ROWS;
        void *m = mmap(NULL, page_round(n * sizeof *rows), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            failed = true;
            return false;
        }
        rows = m;
        mapped = n;
        return true;
    }
    size_t n = mapped * 2 < cap ? mapped * 2 : cap;
    void *m = mremap(rows, page_round(mapped * sizeof *rows),
                     page_round(n * sizeof *rows), MREMAP_MAYMOVE);
    if (m == MAP_FAILED) {
        cap = mapped; /* keep what we have; thinning takes over from here */
        return false;
    }
    rows = m;
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
    while (i < nrows) {
        uint64_t b = bucket_of(rows[i].t_ns, s);
        size_t j = i;
        for (; j < nrows && bucket_of(rows[j].t_ns, s) == b; j++) {
            unsigned p = slot_of(&rows[j]);
            if (!seen[p]) {
                seen[p] = true;
                lo[p] = hi[p] = j;
            } else if (rows[j].current < rows[lo[p]].current) {
                lo[p] = j;
            } else if (rows[j].current > rows[hi[p]].current) {
                hi[p] = j;
            }
        }
        last_start = w;
        for (size_t r = i; r < j; r++) {
            unsigned p = slot_of(&rows[r]);
            if (r == lo[p] || r == hi[p]) {
                if (apply)
                    rows[w] = rows[r]; /* w <= r: never overwrites unread rows */
                w++;
            }
        }
        for (size_t r = i; r < j; r++)
            seen[slot_of(&rows[r])] = false;
        i = j;
    }
    if (apply) {
        nrows = w;
        open_start = last_start;
        shift = s;
    }
    return w;
}

/* The log is full: coarsen the buckets until at most half the cap is used
 * (binary search: the count never grows as buckets get coarser). */
static void thin(void)
{
    int lo = shift < 63 ? shift + 1 : 63, hi = 63;
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
    if (nrows >= faulted)
        prefault();
    rows[nrows++] = *ev;
}

static void remove_row(size_t i)
{
    memmove(&rows[i], &rows[i + 1], (nrows - i - 1) * sizeof *rows);
    nrows--;
}

/* Thinned: `ev` joins the latest bucket if it falls in it, replacing the
 * extremum of its pool that it beats (ties keep the first). */
static void push_thinned(const struct record_event *ev)
{
    if (nrows == 0 ||
        bucket_of(rows[nrows - 1].t_ns, shift) != bucket_of(ev->t_ns, shift)) {
        if (nrows < cap) {
            open_start = nrows;
            append(ev);
        }
        return;
    }
    size_t lo = SIZE_MAX, hi = SIZE_MAX;
    for (size_t i = open_start; i < nrows; i++) {
        if (rows[i].pool != ev->pool)
            continue;
        if (lo == SIZE_MAX || rows[i].current < rows[lo].current)
            lo = i;
        if (hi == SIZE_MAX || rows[i].current > rows[hi].current)
            hi = i;
    }
    if (lo == SIZE_MAX || (lo == hi && ev->current != rows[lo].current)) {
        if (nrows < cap)
            append(ev); /* a new pool, or the bucket's other extremum */
        return;
    }
    if (ev->current > rows[hi].current) {
        if (lo != hi)
            remove_row(hi);
        append(ev);
    } else if (ev->current < rows[lo].current) {
        if (lo != hi)
            remove_row(lo);
        append(ev);
    }
}

void event_log_push(const struct record_event *ev)
{
    /* the common case first: room in the faulted-in part, not thinning */
    if (__builtin_expect(shift < 0 && nrows < faulted && nrows < mapped &&
                         nrows < cap && !failed, 1)) {
        recorded++;
        rows[nrows++] = *ev;
        return;
    }
    if (cap == 0)
        return;
    recorded++;
    if (nrows == mapped && mapped < cap)
        grow(); /* may lower the cap to what is mapped */
    if (failed)
        return;
    if (nrows >= cap)
        thin();
    if (shift < 0)
        append(ev);
    else
        push_thinned(ev);
}

struct event_log_stats event_log_stats(void)
{
    struct event_log_stats s = {cap, nrows, recorded,
                                shift < 0 ? 0 : UINT64_C(1) << shift};
    return s;
}

void event_log_copy(struct record_event *out)
{
    if (nrows > 0)
        memcpy(out, rows, nrows * sizeof *rows);
}

void event_log_reset(void)
{
    if (rows != NULL)
        munmap(rows, page_round(mapped * sizeof *rows));
    rows = NULL;
    nrows = mapped = faulted = open_start = 0;
    recorded = 0;
    shift = -1;
    failed = populate_off = false;
    last_stamp = 0;
}

size_t event_log_machine_cap(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return SIZE_MAX;
    /* an eighth of memory: the log, the dump's copy of it and the host */
    return (size_t)pages / 8 * ((size_t)page / sizeof *rows);
}
