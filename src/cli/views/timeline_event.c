/* timeline_event.c - the head every Chrome trace event of the timeline
 * opens with, for the device tracks (timeline.c), the call-site and tensor
 * tracks and the ranges alike: below them all, so none calls another back.
 * Timestamps are microseconds since process start, with nanosecond
 * decimals.
 */
#include <inttypes.h>
#include <stdio.h>

#include "json_out.h"
#include "timeline.h"

void timeline_time(struct json_out *w, const char *key, int64_t ns)
{
    char buf[48];
    if (ns < 0)
        ns = 0;
    snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
    json_out_key(w, key);
    json_out_raw(w, buf);
}

void timeline_event_head(struct json_out *w, const char *name, const char *cat, const char *ph,
                         int64_t pid, int64_t tid, int64_t t)
{
    json_out_begin_object(w);
    json_out_key_string(w, "name", name);
    if (cat != NULL)
        json_out_key_string(w, "cat", cat);
    json_out_key_string(w, "ph", ph);
    timeline_time(w, "ts", t);
    json_out_key_i64(w, "pid", pid);
    json_out_key_i64(w, "tid", tid);
}
