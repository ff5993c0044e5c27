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

/* What the document said, for the caller's one line about it. */
struct serialise_said {
    int64_t time_ns;   /* the dump time it records */
    int peak_device;   /* the device with the highest peak, -1 none */
    uint64_t peak_bytes;
};

/* Writes the document for `doc` to fd from a consistent copy of the
 * tracker (taken and released inside: no lock is held while writing);
 * with `ev`, a stream checkpoint: its JSON holds no event row, and ev
 * receives the rows new since the last one (struct record_rows).  `said`
 * may be NULL.  Returns 0, or -1 with errno set (ENOMEM, or write's). */
int serialise_state(int fd, const struct serialise_doc *doc, struct record_rows *ev,
                    struct serialise_said *said);

#endif
