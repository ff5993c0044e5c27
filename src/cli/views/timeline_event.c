/* timeline_event.c - the head every Chrome trace event of the timeline
 * opens with, for the device tracks (timeline.c) and the call-site tracks
 * (timeline_sites.c) alike: below both, so neither calls the other back.
 * Timestamps are microseconds since process start, with nanosecond
 * decimals.
 */
#include <inttypes.h>
#include <stdio.h>

#include "json_out.h"
#include "timeline.h"

static void ts(struct json_out *w, int64_t ns)
{
    char buf[48];
    if (ns < 0)
        ns = 0;
    snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
    json_out_key(w, "ts");
    json_out_raw(w, buf);
}

void timeline_event_head(struct json_out *w, const char *name, const char *ph, int64_t pid,
                         int64_t t)
{
    json_out_begin_object(w);
    json_out_key_string(w, "name", name);
    json_out_key_string(w, "ph", ph);
    ts(w, t);
    json_out_key_i64(w, "pid", pid);
    json_out_key_i64(w, "tid", 0);
}
