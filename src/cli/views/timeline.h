/* timeline.h - what timeline.c and timeline_sites.c share (and
 * timeline_event.c under both). */
#ifndef CUMEMTRACE_CLI_TIMELINE_H
#define CUMEMTRACE_CLI_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "json_out.h"
#include "snapshot.h"

#define TIMELINE_SITES_DEFAULT 8 /* per-call-site counters per device */

/* Opens a trace event {name, cat (unless NULL), ph, ts, pid, tid, ...}; the
 * caller adds its members and closes it (timeline_event.c). */
void timeline_event_head(struct json_out *w, const char *name, const char *cat, const char *ph,
                         int64_t pid, int64_t tid, int64_t t_ns);
/* "key": a time in the trace's microseconds, with nanosecond decimals. */
void timeline_time(struct json_out *w, const char *key, int64_t ns);

/* Per device, a counter track of its top `top` call sites at the peak and
 * "other", rebuilt from the event log (call only for an unthinned log).
 * -1 when out of memory. */
int timeline_site_tracks(struct json_out *w, struct snapshot *s, int64_t pid, unsigned top);

/* Per device with PyTorch's tensors (timeline_tensors.c), a counter track
 * "device N tensors by line": a sample at each reading the file holds (the
 * peak's, the failure's, the dump's), its `top` lines, other lines and the
 * cache.  Returns how many tracks it wrote, -1 when out of memory. */
int timeline_tensor_tracks(struct json_out *w, struct snapshot *s, int64_t pid, unsigned top);

/* The program's phases (timeline_phases.c): as Chrome slices on each
 * thread's track (push/pop ranges "X", start/end ranges async "b"/"e",
 * marks "i"); as text, a band per outermost range under the sparklines,
 * on the same `cols` cells over [0, end]. */
void timeline_phase_slices(struct json_out *w, const struct snapshot *s, int64_t pid);
void timeline_phase_bands(FILE *f, const struct snapshot *s, int64_t end, size_t cols,
                          bool ascii);

#endif
