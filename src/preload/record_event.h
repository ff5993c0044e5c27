/* record_event.h - one row of the tracker's event log: written by the
 * tracker (record.c), kept by the log (event_log.c), read by the writers.
 * Its own header so that the log does not depend on the tracker. */
#ifndef CUMEMTRACE_RECORD_EVENT_H
#define CUMEMTRACE_RECORD_EVENT_H

#include <stdint.h>

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

#endif
