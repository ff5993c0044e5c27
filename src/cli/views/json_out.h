/* json_out.h - a small streaming JSON writer (report --json, Chrome traces).
 * It tracks commas and nesting so callers only say what comes next; strings
 * are escaped per RFC 8259 (bytes >= 0x80 pass through unchanged). */
#ifndef CUMEMTRACE_CLI_JSON_OUT_H
#define CUMEMTRACE_CLI_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_OUT_MAX_DEPTH 32 /* the models written here nest about 6 deep */

struct json_out {
    FILE *f;
    bool pretty;     /* newline + two-space indent per level */
    int depth;
    bool has_items[JSON_OUT_MAX_DEPTH]; /* a comma is due before the next item */
    bool after_key;  /* the next value completes a member */
    int break_depth; /* compact mode: a newline between items at this depth
                        (one trace event per line); 0 for none */
};

void json_out_init(struct json_out *w, FILE *f, bool pretty);
void json_out_begin_object(struct json_out *w);
void json_out_end_object(struct json_out *w);
void json_out_begin_array(struct json_out *w);
void json_out_end_array(struct json_out *w);
void json_out_key(struct json_out *w, const char *key);
void json_out_string(struct json_out *w, const char *s);   /* NULL writes null */
void json_out_u64(struct json_out *w, uint64_t v);         /* SNAP_UNKNOWN writes null */
void json_out_i64(struct json_out *w, int64_t v);          /* SNAP_UNKNOWN_I64 writes null */
void json_out_bool(struct json_out *w, bool v);
void json_out_tribool(struct json_out *w, int v);          /* -1 writes null */
void json_out_null(struct json_out *w);
/* A member: the key, then its value as the writers above write it. */
void json_out_key_string(struct json_out *w, const char *key, const char *s);
void json_out_key_u64(struct json_out *w, const char *key, uint64_t v);
void json_out_key_i64(struct json_out *w, const char *key, int64_t v);
void json_out_key_bool(struct json_out *w, const char *key, bool v);
/* "key": null unless `has`, else v[0..n) as an array, or with `names` as an
 * object {names[0]: v[0], ...}. */
void json_out_key_u64s(struct json_out *w, const char *key, bool has, const char *const *names,
                       const uint64_t *v, size_t n);
/* A pre-formatted number, written as is. */
void json_out_raw(struct json_out *w, const char *text);
/* Finishes the document with a newline. */
void json_out_finish(struct json_out *w);

#endif
