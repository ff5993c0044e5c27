/* record_event.h - one row of the tracker's event log: written by the
 * tracker (record.c), kept by the log (event_log.c), read by the writers.
 * Its own header so that the log does not depend on the tracker. */
#ifndef CUMEMTRACE_RECORD_EVENT_H
#define CUMEMTRACE_RECORD_EVENT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Pools a row may name: device ordinals 0..63, and -1 for host-pinned
 * (record.h's RECORD_POOLS, asserted there). */
#define RECORD_EVENT_POOLS 65

/* One entry of the time-ordered event log (event_log.c). */
struct record_event {
    int64_t t_ns;
    int64_t delta;     /* + allocation, - free, in bytes */
    uint64_t current;  /* the pool's current bytes right after the event */
    uint32_t stack;    /* stack id, 0 if unknown (frees of unseen pointers) */
    int16_t pool;      /* device ordinal, or -1 for host-pinned */
    uint8_t kind;
};

/* A row's last eight bytes - stack, pool, kind and padding - as one word:
 * what a row says about its site, which the site keeps ready, so a push
 * stores it at once. */
#define RECORD_EVENT_TAG_AT offsetof(struct record_event, stack)
_Static_assert(sizeof(struct record_event) == RECORD_EVENT_TAG_AT + 8,
               "stack, pool and kind end the row, in one word");

static inline uint64_t record_event_tag(uint32_t stack, int16_t pool, uint8_t kind)
{
    struct record_event e;
    memset(&e, 0, sizeof e);
    e.stack = stack;
    e.pool = pool;
    e.kind = kind;
    uint64_t tag;
    memcpy(&tag, (const char *)&e + RECORD_EVENT_TAG_AT, sizeof tag);
    return tag;
}

#endif
