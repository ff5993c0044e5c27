/* timeline.h - what timeline.c and timeline_sites.c share. */
#ifndef CUMEMTRACE_CLI_TIMELINE_H
#define CUMEMTRACE_CLI_TIMELINE_H

#include <stdint.h>

#include "jsonw.h"
#include "snapshot.h"

#define TIMELINE_SITES_DEFAULT 8 /* per-call-site counters per device */

/* Opens a trace event {name, ph, ts, pid, tid: 0, ...}; the caller adds
 * its members and closes it. */
void timeline_event_head(struct jsonw *w, const char *name, const char *ph, int64_t pid,
                         int64_t t_ns);

/* Per device, a counter track of its top `top` call sites at the peak and
 * "other", rebuilt from the event log (call only for an unthinned log).
 * -1 when out of memory. */
int timeline_site_tracks(struct jsonw *w, struct snapshot *s, int64_t pid, unsigned top);

#endif
