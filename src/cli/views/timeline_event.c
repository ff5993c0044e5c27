/* timeline_event.c - the head every Chrome trace event of the timeline
 * opens with, for the device tracks (timeline.c) and the call-site tracks
 * (timeline_sites.c) alike: below both, so neither calls the other back.
 * Timestamps are microseconds since process start, with nanosecond
 * decimals.
 */
#include <inttypes.h>
#include <stdio.h>

#include "jsonw.h"
#include "timeline.h"

static void ts(struct jsonw *w, int64_t ns)
{
    char buf[48];
    if (ns < 0)
        ns = 0;
    snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
    jsonw_key(w, "ts");
    jsonw_raw(w, buf);
}

void timeline_event_head(struct jsonw *w, const char *name, const char *ph, int64_t pid,
                         int64_t t)
{
    jsonw_begin_object(w);
    jsonw_key(w, "name"); jsonw_string(w, name);
    jsonw_key(w, "ph"); jsonw_string(w, ph);
    ts(w, t);
    jsonw_key(w, "pid"); jsonw_i64(w, pid);
    jsonw_key(w, "tid"); jsonw_i64(w, 0);
}
