/* event_log.h - the bounded, time-ordered log of allocations and frees that
 * the tracker keeps for the timeline.  Not thread-safe on its own: every
 * function runs under the tracker's lock (record.c).  See event_log.c for
 * the order, memory and thinning guarantees. */
#ifndef CUMEMTRACE_EVENT_LOG_H
#define CUMEMTRACE_EVENT_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "record_event.h"

/* Sets the bound (0 = no log) and the clock that re-stamps a late event
 * (see event_log_stamp; NULL: none).  Call once, first. */
void event_log_init(size_t cap, int64_t (*clock)(void));

/* What every push reads and writes, apart from the rest of the log's state
 * and on a cache line of its own: each thread's push writes it (under the
 * tracker's lock), and nothing read outside the lock may share the line. */
struct event_log_cursor {
    struct record_event *rows;
    size_t nrows;       /* rows held */
    size_t fast_end;    /* a push with nrows below it only appends: 0 while
                           the log thins, has failed or has no bound */
    uint64_t recorded;  /* events ever pushed */
    int64_t last_stamp; /* the latest row's time */
} __attribute__((aligned(64)));
extern struct event_log_cursor event_log_cursor __attribute__((visibility("hidden")));

int64_t event_log_stamp_late(int64_t now);

/* The time of an event that the caller read the clock for just before the
 * lock: `now`, unless it is earlier than the previous row's (a thread that
 * read its clock, then waited for the lock while another one logged), in
 * which case the previous row's - so rows come out in time order whatever
 * the threads do, with no clock read inside the critical section on the
 * common path.  A caller late by more than EVENT_LOG_LATE_NS (preempted
 * between its reading and the lock) is re-stamped with the clock. */
#define EVENT_LOG_LATE_NS 20000
static inline int64_t event_log_stamp(int64_t now)
{
    if (__builtin_expect(now < event_log_cursor.last_stamp, 0))
        return event_log_stamp_late(now);
    event_log_cursor.last_stamp = now;
    return now;
}

/* event_log_add's other cases (growing, faulting in, thinning, full): it
 * takes the row's fields (no row on the caller's stack). */
void event_log_add_slow(int64_t t, int64_t delta, uint64_t current, uint64_t tag);

/* Appends the row {t, delta, current, tag} (t from event_log_stamp, tag:
 * record_event_tag), a few stores on the common path, thinning when the log
 * is full.  Never fails: without memory the log stops growing and says so
 * through event_log_stats().kept. */
static inline void event_log_add(int64_t t, int64_t delta, uint64_t current,
                                 uint64_t tag)
{
    struct event_log_cursor *c = &event_log_cursor;
    if (__builtin_expect(c->nrows < c->fast_end, 1)) {
        struct record_event *r = &c->rows[c->nrows++];
        r->t_ns = t;
        r->delta = delta;
        r->current = current;
        memcpy((char *)r + RECORD_EVENT_TAG_AT, &tag, sizeof tag);
        c->recorded++;
        return;
    }
    event_log_add_slow(t, delta, current, tag);
}

struct event_log_stats {
    size_t cap;         /* the bound */
    size_t kept;        /* rows held */
    uint64_t recorded;  /* events ever pushed */
    uint64_t bucket_ns; /* 0: every event kept; else the thinning bucket */
};
struct event_log_stats event_log_stats(void);

/* Copies the kept rows from the from-th on, oldest first, into
 * out[0..kept - from). */
void event_log_copy(struct record_event *out, size_t from);
/* The same for the n rows from the from-th (clipped to those kept). */
void event_log_copy_range(struct record_event *out, size_t from, size_t n);

/* The first kept row that a reader who took the rows when `recorded`
 * events had been pushed, the last of them stamped `last_t_ns`, has not
 * seen: the last (recorded now - recorded then) of an unthinned log; in a
 * thinned one, those stamped after last_t_ns.  0 when recorded is 0. */
size_t event_log_fresh_from(uint64_t recorded, int64_t last_t_ns);

/* Empties the log and returns its memory (fork child); keeps the settings. */
void event_log_reset(void);

/* The largest bound worth allowing on this machine: the rows of a full log
 * (and the dump's copy of them) must fit in a small share of its memory. */
size_t event_log_machine_cap(void);

#endif
