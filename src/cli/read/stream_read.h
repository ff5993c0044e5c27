/* stream_read.h - reads a stream file (docs/stream-format.md) back into an
 * ordinary snapshot document, reason "killed". */
#ifndef CUMEMTRACE_CLI_STREAM_READ_H
#define CUMEMTRACE_CLI_STREAM_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "format.h"

#define STREAM_FILE_MAGIC FORMAT_STREAM_MAGIC

struct stream_info {
    size_t records, checkpoints, heartbeats, skipped;
    size_t stopped_at;       /* byte where reading stopped */
    char stopped[160];       /* why: "end of file", "truncated record ..." */
    int64_t state_ns;        /* the last checkpoint's dump time */
    int64_t alive_ns;        /* the last sign of life (heartbeat or checkpoint) */
    unsigned flush_ms;
};

/* True when buf starts like a stream file. */
bool stream_is(const char *buf, size_t len);

/* Reads the stream in buf[0..len) and returns in *doc (malloc'd,
 * NUL-terminated, *doclen bytes) the last complete checkpoint as a snapshot
 * with reason "killed" and a "recovered" object saying how stale it is.
 * Returns 0, or a CLI_E* code with err set ("name" names the file). */
int stream_recover(const char *name, const char *buf, size_t len, char **doc,
                   size_t *doclen, struct stream_info *info, struct cli_error *err);

/* "state recorded at most 1.2 s before the process ended (...)" */
void stream_staleness(const struct stream_info *info, char *out, size_t n);

#endif
