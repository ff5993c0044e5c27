/* jsonw.c - see jsonw.h. */
#include "jsonw.h"

#include <inttypes.h>
#include <string.h>

#include "esc.h"
#include "snapshot.h"
#include "utf8.h"

void jsonw_init(struct jsonw *w, FILE *f, bool pretty)
{
    w->f = f;
    w->pretty = pretty;
    w->depth = 0;
    w->has_items[0] = false;
    w->after_key = false;
    w->break_depth = 0;
}

static void newline(struct jsonw *w)
{
    if (!w->pretty)
        return;
    fputc('\n', w->f);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->f);
}

/* Called before every value and every key. */
static void item(struct jsonw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        if (w->has_items[w->depth])
            fputc(',', w->f);
        w->has_items[w->depth] = true;
        if (!w->pretty && w->depth == w->break_depth)
            fputc('\n', w->f);
        newline(w);
    }
}

static void open(struct jsonw *w, char c)
{
    item(w);
    fputc(c, w->f);
    if (w->depth + 1 < JSONW_MAX_DEPTH)
        w->depth++;
    w->has_items[w->depth] = false;
}

static void close(struct jsonw *w, char c)
{
    bool had = w->has_items[w->depth];
    if (w->depth > 0)
        w->depth--;
    if (had)
        newline(w);
    fputc(c, w->f);
}

void jsonw_begin_object(struct jsonw *w) { open(w, '{'); }
void jsonw_end_object(struct jsonw *w) { close(w, '}'); }
void jsonw_begin_array(struct jsonw *w) { open(w, '['); }
void jsonw_end_array(struct jsonw *w) { close(w, ']'); }

/* A JSON string that is valid UTF-8 and safe on a terminal whatever the
 * model holds (a crafted snapshot may carry any bytes): a byte that begins
 * no well-formed sequence becomes \ufffd, and what esc.h would escape in
 * text is written as a \u escape (same value, nothing raw). */
static void quoted(struct jsonw *w, const char *s)
{
    FILE *f = w->f;
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0) {
        uint32_t cp;
        size_t k = utf8_decode(p, left, &cp);
        if (k == 0) {
            fputs("\\ufffd", f);
            k = 1;
        } else if (cp == '"') {
            fputs("\\\"", f);
        } else if (cp == '\\') {
            fputs("\\\\", f);
        } else if (cp == '\n') {
            fputs("\\n", f);
        } else if (cp == '\r') {
            fputs("\\r", f);
        } else if (cp == '\t') {
            fputs("\\t", f);
        } else if (esc_unsafe(cp)) {
            fprintf(f, "\\u%04x", (unsigned)cp);
        } else {
            fwrite(p, 1, k, f);
        }
        p += k;
        left -= k;
    }
    fputc('"', f);
}

void jsonw_key(struct jsonw *w, const char *key)
{
    item(w);
    quoted(w, key);
    fputs(w->pretty ? ": " : ":", w->f);
    w->after_key = true;
}

void jsonw_string(struct jsonw *w, const char *s)
{
    if (s == NULL) {
        jsonw_null(w);
        return;
    }
    item(w);
    quoted(w, s);
}

void jsonw_u64(struct jsonw *w, uint64_t v)
{
    if (v == SNAP_UNKNOWN) {
        jsonw_null(w);
        return;
    }
    item(w);
    fprintf(w->f, "%" PRIu64, v);
}

void jsonw_i64(struct jsonw *w, int64_t v)
{
    if (v == SNAP_UNKNOWN_I64) {
        jsonw_null(w);
        return;
    }
    item(w);
    fprintf(w->f, "%" PRId64, v);
}

void jsonw_bool(struct jsonw *w, bool v)
{
    item(w);
    fputs(v ? "true" : "false", w->f);
}

void jsonw_tribool(struct jsonw *w, int v)
{
    if (v < 0)
        jsonw_null(w);
    else
        jsonw_bool(w, v != 0);
}

void jsonw_null(struct jsonw *w)
{
    item(w);
    fputs("null", w->f);
}

void jsonw_raw(struct jsonw *w, const char *text)
{
    item(w);
    fputs(text, w->f);
}

void jsonw_finish(struct jsonw *w)
{
    fputc('\n', w->f);
}
