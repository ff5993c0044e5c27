/* serialise.h - the one serialiser of the tracker's state: every snapshot
 * (exit, oom, signal, api, periodic, exec) and the stream's checkpoints are
 * this document (docs/snapshot-format.md), written by serialise.c. */
#ifndef CUMEMTRACE_SERIALISE_H
#define CUMEMTRACE_SERIALISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct oom_info;

/* What a document states beyond the tracker's state. */
struct serialise_doc {
    const char *reason;          /* "exit", "oom", "signal", "stream", ... */
    unsigned sequence;           /* the process's dump number */
    const struct oom_info *oom;  /* the failing request of a post-mortem, or NULL */
    const char *signame;         /* "SIGTERM" for reason "signal", else NULL */
    bool checkpoint;             /* a stream checkpoint (its symbols are kept) */
};

/* Where a stream's checkpoints are in the event log.  A checkpoint's JSON
 * holds no event rows: serialise_state hands back, in rows[0..nrows)
 * (malloc'd, the caller frees), those new since the last checkpoint
 * ({0, 0}: every row the log holds), for the stream's binary records. */
struct serialise_events {
    uint64_t recorded; /* events_recorded at the last checkpoint */
    int64_t last_t_ns; /* the last row handed back */
    struct record_event *rows;
    size_t nrows;
};

/* What the document said, for the caller's one line about it. */
struct serialise_said {
    int64_t time_ns;   /* the dump time it records */
    int peak_device;   /* the device with the highest peak, -1 none */
    uint64_t peak_bytes;
};

/* Writes the document for `doc` to fd from a consistent copy of the
 * tracker (taken and released inside: no lock is held while writing);
 * with `ev`, a stream checkpoint (above).  `said` may be NULL.  Returns 0,
 * or -1 with errno set (ENOMEM, or write's). */
int serialise_state(int fd, const struct serialise_doc *doc, struct serialise_events *ev,
                    struct serialise_said *said);

#endif
