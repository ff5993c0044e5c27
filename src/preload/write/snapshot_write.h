/* snapshot_write.h - snapshot files (snapshot_write.c); their document is
 * the serialiser's (serialise.h, docs/snapshot-format.md). */
#ifndef CUMEMTRACE_SNAPSHOT_WRITE_H
#define CUMEMTRACE_SNAPSHOT_WRITE_H

#include <stddef.h>
#include <stdint.h>

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

#endif
