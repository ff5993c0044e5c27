/* snapshot_write.h - the JSON snapshot (docs/snapshot-format.md). */
#ifndef CUMEMTRACE_SNAPSHOT_WRITE_H
#define CUMEMTRACE_SNAPSHOT_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct oom_info;

/* Writes one snapshot for `reason` ("exit", "oom", "signal", "api").
 * path: NULL to name it from CUMEMTRACE_OUTPUT, or a file this process wrote
 * before (rewritten in place: an OOM chain updating its post-mortem) or an
 * explicit target (cumemtrace_dump).  oom: the failing request, or NULL.
 * The name used goes to out_path when given.  Returns 0, or -1 after one
 * warning that names the file and the cause.  Never called with the
 * tracker lock held. */
int snapshot_write(const char *reason, const char *path,
                   const struct oom_info *oom, char *out_path, size_t out_len);

/* Gives back the file number of `path`, a "<...>.<reason>.<n>.json" this
 * process wrote and then removed, when it is the latest of its reason: the
 * next file takes it, so names stay without gaps. */
void snapshot_name_release(const char *reason, const char *path);
/* A snapshot for a signal (reason "signal", its name in "signal"). */
int snapshot_write_signal(const char *signame, char *out_path, size_t out_len);

/* Rewrites the file `path` this process wrote before (the exit snapshot a
 * Python host's finalisation wrote, when the process went on). */
int snapshot_rewrite(const char *reason, const char *path);

/* Where a stream's checkpoints are in the event log.  A checkpoint's JSON
 * holds no event rows: snapshot_serialise hands back, in rows[0..nrows)
 * (malloc'd, the caller frees), those new since the last checkpoint
 * ({0, 0}: every row the log holds), for the stream's binary records. */
struct snapshot_events {
    uint64_t recorded; /* events_recorded at the last checkpoint */
    int64_t last_t_ns; /* the last row handed back */
    struct record_event *rows;
    size_t nrows;
};

/* The one serialiser of the state (every snapshot and the stream's
 * checkpoints): writes the document for `reason` to fd; with `ev`, a
 * checkpoint (above).  *time_ns gets the dump time it records.  Returns 0,
 * or -1 with errno set. */
int snapshot_serialise(int fd, const char *reason, struct snapshot_events *ev,
                       int64_t *time_ns);

#endif
