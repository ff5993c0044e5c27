/* event_log.h - the bounded, time-ordered log of allocations and frees that
 * the tracker keeps for the timeline.  Not thread-safe on its own: every
 * function runs under the tracker's lock (record.c).  See event_log.c for
 * the order, memory and thinning guarantees. */
#ifndef CUMEMTRACE_EVENT_LOG_H
#define CUMEMTRACE_EVENT_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "record_event.h"

/* Sets the bound (0 = no log) and the clock rows are stamped with (NULL:
 * the time the caller passes, made non-decreasing).  Call once, first. */
void event_log_init(size_t cap, int64_t (*clock)(void));

/* The time of an event happening now, under the lock: the clock's reading
 * (or `now` without a clock), never earlier than the previous stamp, so
 * rows come out in time order whatever the threads do. */
int64_t event_log_stamp(int64_t now);

/* Appends one event (its t_ns from event_log_stamp), thinning when the log
 * is full.  Never fails: without memory the log stops growing and says so
 * through event_log_stats().kept. */
void event_log_push(const struct record_event *ev);

struct event_log_stats {
    size_t cap;         /* the bound */
    size_t kept;        /* rows held */
    uint64_t recorded;  /* events ever pushed */
    uint64_t bucket_ns; /* 0: every event kept; else the thinning bucket */
};
struct event_log_stats event_log_stats(void);

/* Copies the kept rows, oldest first, into out[0..kept). */
void event_log_copy(struct record_event *out);

/* Empties the log and returns its memory (fork child); keeps the settings. */
void event_log_reset(void);

/* The largest bound worth allowing on this machine: the rows of a full log
 * (and the dump's copy of them) must fit in a small share of its memory. */
size_t event_log_machine_cap(void);

#endif
