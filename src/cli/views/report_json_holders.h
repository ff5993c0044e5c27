/* report_json_holders.h - `report --json`'s holders (model/holders.h): the
 * groups the text report prints at the failure, at the peak and at the
 * dump, and the growth by line (docs/cli.md, HOLDERS and GROWTH). */
#ifndef CUMEMTRACE_CLI_REPORT_JSON_HOLDERS_H
#define CUMEMTRACE_CLI_REPORT_JSON_HOLDERS_H

#include "holders.h"
#include "json_out.h"

/* HOLDERS of device d of s at moment m (d NULL with HOLDERS_OOM: the
 * failure's), or null when there is nothing to list; the first `top`
 * groups (0: all), the others summed in "rest".  -1 when out of memory. */
int report_json_holders(struct json_out *w, struct snapshot *s, const struct snap_device *d,
                        enum holders_moment m, unsigned top);

/* GROWTH of device d: null when not measured.  -1 when out of memory. */
int report_json_growth(struct json_out *w, struct snapshot *s, const struct snap_device *d);

#endif
