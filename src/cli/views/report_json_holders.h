/* report_json_holders.h - `report --json`'s holders (model/holders.h): the
 * groups the text report prints at the failure, at the peak and at the
 * dump, and the growth by line (docs/cli.md, HOLDERS and GROWTH). */
#ifndef CUMEMTRACE_CLI_REPORT_JSON_HOLDERS_H
#define CUMEMTRACE_CLI_REPORT_JSON_HOLDERS_H

#include <stddef.h>
#include <stdint.h>

#include "holders.h"
#include "json_out.h"

/* A schema row of snapshot.h as `report --json` prints it: the key, how,
 * from where in the row's struct, and in which run of its object (the
 * other rows, nested values, are printed by hand). */
enum value_kind { V_U64, V_I64, V_BOOL, V_STR };

struct row {
    const char *key;
    uint8_t kind, run;
    size_t off;
};

#define ROW(st, key, member, type, json) ROW_##type(st, key, member, json)
#define ROW_U64(st, key, member, json) {#key, V_U64, json, offsetof(struct st, member)},
#define ROW_U64N ROW_U64
#define ROW_I64(st, key, member, json) {#key, V_I64, json, offsetof(struct st, member)},
#define ROW_I64N ROW_I64
#define ROW_BOOLN(st, key, member, json) {#key, V_BOOL, json, offsetof(struct st, member)},
#define ROW_STR(st, key, member, json) {#key, V_STR, json, offsetof(struct st, member)},
#define ROW_STRN ROW_STR
#define ROW_NONE(st, key, member, json)
#define ROW_FN ROW_NONE
#define ROW_ARRAY ROW_NONE
#define ROW_LIST ROW_NONE
#define ROW_OBJECT ROW_NONE
#define ROW_OPTIONAL ROW_NONE
#define ROW_SKIP ROW_NONE
#define ROW_RAWN ROW_NONE
#define ROW_KIND ROW_NONE
#define ROW_FLAG ROW_NONE
#define ROW_GROUPS ROW_NONE
#define ROW_PHASE_ROWS ROW_NONE
#define ROW_TENSORS ROW_NONE
#define ROW_PEAK_TENSORS ROW_NONE
#define ROW_GROWTH ROW_NONE
#define ROW_SERIES ROW_NONE
#define ROW_ORIGIN ROW_NONE

/* The rows of `run`, in the table's order, into the object being written. */
void report_json_rows(struct json_out *w, const void *obj, const struct row *t, size_t n,
                      int run);
#define ROWS(w, obj, table, run) \
    report_json_rows(w, obj, table, sizeof table / sizeof table[0], run)

/* An origin (snapshot.h's snap_origin: thread, node, forward_line, and
 * sentence unless NULL), or null when o is NULL or has no thread. */
void report_json_origin(struct json_out *w, const struct snapshot *s,
                        const struct snap_origin *o, const char *sentence);

/* HOLDERS of device d of s at moment m (d NULL with HOLDERS_OOM: the
 * failure's), or null when there is nothing to list; the first `top`
 * groups (0: all), the others summed in "rest".  -1 when out of memory. */
int report_json_holders(struct json_out *w, struct snapshot *s, const struct snap_device *d,
                        enum holders_moment m, unsigned top);

/* GROWTH of device d: null when not measured.  -1 when out of memory. */
int report_json_growth(struct json_out *w, struct snapshot *s, const struct snap_device *d);

#endif
