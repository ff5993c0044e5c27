/* jsonw.h - a small streaming JSON writer (report --json, Chrome traces).
 * It tracks commas and nesting so callers only say what comes next; strings
 * are escaped per RFC 8259 (bytes >= 0x80 pass through unchanged). */
#ifndef CUMEMTRACE_CLI_JSONW_H
#define CUMEMTRACE_CLI_JSONW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSONW_MAX_DEPTH 32 /* the models written here nest about 6 deep */

struct jsonw {
    FILE *f;
    bool pretty;     /* newline + two-space indent per level */
    int depth;
    bool has_items[JSONW_MAX_DEPTH]; /* a comma is due before the next item */
    bool after_key;  /* the next value completes a member */
    int break_depth; /* compact mode: a newline between items at this depth
                        (one trace event per line); 0 for none */
};

void jsonw_init(struct jsonw *w, FILE *f, bool pretty);
void jsonw_begin_object(struct jsonw *w);
void jsonw_end_object(struct jsonw *w);
void jsonw_begin_array(struct jsonw *w);
void jsonw_end_array(struct jsonw *w);
void jsonw_key(struct jsonw *w, const char *key);
void jsonw_string(struct jsonw *w, const char *s);   /* NULL writes null */
void jsonw_u64(struct jsonw *w, uint64_t v);         /* SNAP_UNKNOWN writes null */
void jsonw_i64(struct jsonw *w, int64_t v);          /* SNAP_UNKNOWN_I64 writes null */
void jsonw_bool(struct jsonw *w, bool v);
void jsonw_tribool(struct jsonw *w, int v);          /* -1 writes null */
void jsonw_null(struct jsonw *w);
/* A pre-formatted number, written as is. */
void jsonw_raw(struct jsonw *w, const char *text);
/* Finishes the document with a newline. */
void jsonw_finish(struct jsonw *w);

#endif
