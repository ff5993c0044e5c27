/* stream.h - the per-process record that survives SIGKILL (stream.c,
 * docs/stream-format.md). */
#ifndef CUMEMTRACE_STREAM_H
#define CUMEMTRACE_STREAM_H

#include <stdbool.h>
#include <stdint.h>

/* CUMEMTRACE_STREAM is not off. */
bool stream_enabled(void);

/* Background thread, every CUMEMTRACE_FLUSH_MS: creates the file at the
 * first call, then appends a checkpoint when the state moved (no more
 * often than keeps the thread under 1% of a CPU) or a heartbeat. */
void stream_flush(int64_t now_ns);

/* The process's own record is written (exit or signal snapshot): removes
 * the stream (CUMEMTRACE_STREAM=auto) or keeps it (keep); stops flushing. */
void stream_finish(bool snapshot_written);

/* fork child: the parent's file is not the child's. */
void stream_atfork_child(void);

#endif
