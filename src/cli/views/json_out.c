/* json_out.c - see json_out.h. */
#include "json_out.h"

#include <inttypes.h>
#include <string.h>

#include "esc.h"
#include "snapshot.h"
#include "utf8.h"

void json_out_init(struct json_out *w, FILE *f, bool pretty)
{
    w->f = f;
    w->pretty = pretty;
    w->depth = 0;
    w->has_items[0] = false;
    w->after_key = false;
    w->break_depth = 0;
}

static void newline(struct json_out *w)
{
    if (!w->pretty)
        return;
    fputc('\n', w->f);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->f);
}

/* Called before every value and every key. */
static void item(struct json_out *w)
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

static void open(struct json_out *w, char c)
{
    item(w);
    fputc(c, w->f);
    if (w->depth + 1 < JSON_OUT_MAX_DEPTH)
        w->depth++;
    w->has_items[w->depth] = false;
}

static void close(struct json_out *w, char c)
{
    bool had = w->has_items[w->depth];
    if (w->depth > 0)
        w->depth--;
    if (had)
        newline(w);
    fputc(c, w->f);
}

void json_out_begin_object(struct json_out *w) { open(w, '{'); }
void json_out_end_object(struct json_out *w) { close(w, '}'); }
void json_out_begin_array(struct json_out *w) { open(w, '['); }
void json_out_end_array(struct json_out *w) { close(w, ']'); }

/* A JSON string that is valid UTF-8 and safe on a terminal whatever the
 * model holds (a crafted snapshot may carry any bytes): a byte that begins
 * no well-formed sequence becomes \ufffd, and what esc.h would escape in
 * text is written as a \u escape (same value, nothing raw). */
static void quoted(struct json_out *w, const char *s)
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

void json_out_key(struct json_out *w, const char *key)
{
    item(w);
    quoted(w, key);
    fputs(w->pretty ? ": " : ":", w->f);
    w->after_key = true;
}

void json_out_string(struct json_out *w, const char *s)
{
    if (s == NULL) {
        json_out_null(w);
        return;
    }
    item(w);
    quoted(w, s);
}

void json_out_u64(struct json_out *w, uint64_t v)
{
    if (v == SNAP_UNKNOWN) {
        json_out_null(w);
        return;
    }
    item(w);
    fprintf(w->f, "%" PRIu64, v);
}

void json_out_i64(struct json_out *w, int64_t v)
{
    if (v == SNAP_UNKNOWN_I64) {
        json_out_null(w);
        return;
    }
    item(w);
    fprintf(w->f, "%" PRId64, v);
}

void json_out_bool(struct json_out *w, bool v)
{
    item(w);
    fputs(v ? "true" : "false", w->f);
}

void json_out_tribool(struct json_out *w, int v)
{
    if (v < 0)
        json_out_null(w);
    else
        json_out_bool(w, v != 0);
}

void json_out_null(struct json_out *w)
{
    item(w);
    fputs("null", w->f);
}

void json_out_raw(struct json_out *w, const char *text)
{
    item(w);
    fputs(text, w->f);
}

void json_out_finish(struct json_out *w)
{
    fputc('\n', w->f);
}

void json_out_key_string(struct json_out *w, const char *key, const char *s)
{
    json_out_key(w, key);
    json_out_string(w, s);
}

void json_out_key_u64(struct json_out *w, const char *key, uint64_t v)
{
    json_out_key(w, key);
    json_out_u64(w, v);
}

void json_out_key_i64(struct json_out *w, const char *key, int64_t v)
{
    json_out_key(w, key);
    json_out_i64(w, v);
}

void json_out_key_bool(struct json_out *w, const char *key, bool v)
{
    json_out_key(w, key);
    json_out_bool(w, v);
}

void json_out_key_u64s(struct json_out *w, const char *key, bool has, const char *const *names,
                       const uint64_t *v, size_t n)
{
    json_out_key(w, key);
    if (!has) {
        json_out_null(w);
        return;
    }
    if (names) {
        json_out_begin_object(w);
        for (size_t i = 0; i < n; i++)
            json_out_key_u64(w, names[i], v[i]);
        json_out_end_object(w);
    } else {
        json_out_begin_array(w);
        for (size_t i = 0; i < n; i++)
            json_out_u64(w, v[i]);
        json_out_end_array(w);
    }
}
