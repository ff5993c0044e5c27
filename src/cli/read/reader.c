/* reader.c - see reader.h. */
#include "reader.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- messages ---- */

static const char *reader_path_text(const struct reader *r, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    int d = r->depth < PATH_MAX_DEPTH ? r->depth : PATH_MAX_DEPTH;
    for (int i = 0; i < d && used < n; i++) {
        const struct path_elem *e = &r->path[i];
        int w;
        if (e->key != NULL)
            w = snprintf(buf + used, n - used, "%s%s", i ? "." : "", e->key);
        else
            w = snprintf(buf + used, n - used, "[%zu]", e->index);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (buf[0] == '\0')
        snprintf(buf, n, "the top level");
    return buf;
}

int reader_json_failed(struct reader *r)
{
    struct json_cursor *c = &r->c;
    unsigned long line, col;
    switch (c->status) {
    case JSON_ETRUNC:
        return errors_set(r->err, CLI_ETRUNC,
                          "cannot read snapshot '%s': truncated after %zu bytes",
                          r->name, r->len);
    case JSON_ENOMEM:
        return errors_set(r->err, CLI_ENOMEM,
                          "cannot read snapshot '%s': out of memory", r->name);
    default:
        json_line_col(c->buf, c->err_offset, &line, &col);
        return errors_set(r->err, CLI_ENOTJSON,
                          "cannot read snapshot '%s': not JSON: %s at line %lu, column %lu",
                          r->name, c->err_msg, line, col);
    }
}

int reader_nomem(struct reader *r)
{
    return errors_set(r->err, CLI_ENOMEM, "cannot read snapshot '%s': out of memory",
                      r->name);
}

const char *reader_type_text(enum json_type t)
{
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    default: return "invalid";
    }
}

int reader_bad_value(struct reader *r, int rc, const char *expected)
{
    if (rc != JSON_ETYPE && rc != JSON_ERANGE)
        return reader_json_failed(r);
    char path[256];
    reader_path_text(r, path, sizeof path);
    enum json_type t = json_peek(&r->c);
    if (t == JSON_INVALID)
        return reader_json_failed(r);
    unsigned long line, col;
    json_line_col(r->c.buf, json_offset(&r->c), &line, &col);
    if (rc == JSON_ERANGE) {
        char num[32];
        size_t i = 0;
        const char *p = r->c.p;
        while (i < sizeof num - 1 && (strchr("+-.eE", p[i]) || (p[i] >= '0' && p[i] <= '9')) && p[i])
            num[i] = p[i], i++;
        num[i] = '\0';
        return errors_set(r->err, CLI_EVALUE,
                          "cannot read snapshot '%s': %s is %s, expected %s at line %lu, column %lu",
                          r->name, path, num, expected, line, col);
    }
    return errors_set(r->err, CLI_ETYPE,
                      "cannot read snapshot '%s': %s is %s, expected %s at line %lu, column %lu",
                      r->name, path, reader_type_text(t), expected, line, col);
}

int reader_invalid(struct reader *r, const char *what)
{
    char path[256];
    reader_path_text(r, path, sizeof path);
    return errors_set(r->err, CLI_EVALUE, "cannot read snapshot '%s': %s %s",
                      r->name, path, what);
}

/* ---- scalars ---- */

bool reader_take_null(struct reader *r)
{
    if (json_peek(&r->c) != JSON_NULL)
        return false;
    return json_get_null(&r->c) == JSON_OK;
}

int reader_u64(struct reader *r, uint64_t *out, bool nullable)
{
    int rc = json_get_uint64(&r->c, out);
    if (rc == JSON_OK)
        return 0;
    if (nullable && rc == JSON_ETYPE && reader_take_null(r)) {
        *out = SNAP_UNKNOWN;
        return 0;
    }
    return reader_bad_value(r, rc, nullable ? "a non-negative integer or null"
                                     : "a non-negative integer");
}

int reader_i64(struct reader *r, int64_t *out, bool nullable)
{
    int rc = json_get_int64(&r->c, out);
    if (rc == JSON_OK)
        return 0;
    if (nullable && rc == JSON_ETYPE && reader_take_null(r)) {
        *out = SNAP_UNKNOWN_I64;
        return 0;
    }
    return reader_bad_value(r, rc, nullable ? "an integer or null" : "an integer");
}

/* A boolean, or null read as -1 (F_BOOLN: the format has no other). */
static int bool_or_null(struct reader *r, int *out)
{
    bool b;
    int rc = json_get_bool(&r->c, &b);
    if (rc == JSON_OK) {
        *out = b;
        return 0;
    }
    if (rc == JSON_ETYPE && reader_take_null(r)) {
        *out = -1;
        return 0;
    }
    return reader_bad_value(r, rc, "a boolean or null");
}

int reader_str(struct reader *r, const char **out, bool nullable)
{
    const char *s;
    size_t n;
    int rc = json_get_span(&r->c, &s, &n);
    if (rc == JSON_OK) {
        *out = snapshot_intern(r->ctx, s, n);
        return *out ? 0 : reader_nomem(r);
    }
    if (nullable && rc == JSON_ETYPE && reader_take_null(r)) {
        *out = NULL;
        return 0;
    }
    return reader_bad_value(r, rc, nullable ? "a string or null" : "a string");
}

int reader_raw(struct reader *r, const char **out)
{
    int rc = json_get_string(&r->c, out, NULL);
    if (rc == JSON_OK)
        return 0;
    if (rc == JSON_ETYPE && reader_take_null(r)) {
        *out = NULL;
        return 0;
    }
    return reader_bad_value(r, rc, "a string or null");
}

/* A kind, a string or null (null keeps *kind), compared in place rather
 * than interned: a snapshot has one per group. */
static int kind_or_null(struct reader *r, uint8_t *kind)
{
    const char *k;
    size_t n;
    int rc = json_get_span(&r->c, &k, &n);
    if (rc == JSON_OK) {
        const char *nul = memchr(k, '\0', n); /* a decoded \u0000 ends it */
        *kind = (uint8_t)snapshot_kind_span(k, nul != NULL ? (size_t)(nul - k) : n);
        return 0;
    }
    if (rc == JSON_ETYPE && reader_take_null(r))
        return 0;
    return reader_bad_value(r, rc, "a string or null");
}

/* ---- objects, table-driven ---- */

static int reader_field(struct reader *r, void *obj, const struct field *f)
{
    char *p = (char *)obj + f->off;
    switch (f->type) {
    case F_U64: return reader_u64(r, (uint64_t *)(void *)p, false);
    case F_U64N: return reader_u64(r, (uint64_t *)(void *)p, true);
    case F_I64: return reader_i64(r, (int64_t *)(void *)p, false);
    case F_I64N: return reader_i64(r, (int64_t *)(void *)p, true);
    case F_BOOLN: return bool_or_null(r, (int *)(void *)p);
    case F_STR: return reader_str(r, (const char **)(void *)p, false);
    case F_STRN: return reader_str(r, (const char **)(void *)p, true);
    case F_RAWN: return reader_raw(r, (const char **)(void *)p);
    case F_KIND: return kind_or_null(r, (uint8_t *)p);
    case F_ARRAY: return reader_array(r, p, f->each);
    case F_LIST: return reader_take_null(r) ? 0 : reader_array(r, p, f->each);
    case F_OBJECT: return reader_object(r, p, f->sub, f->nsub);
    case F_OPTIONAL: return reader_optional_object(r, p, (bool *)(void *)p, f->sub, f->nsub);
    case F_FLAG: return reader_optional_object(r, obj, (bool *)(void *)p, f->sub, f->nsub);
    default: return f->fn(r, p); /* FIELD_FN: offset 0, the object itself */
    }
}

int reader_object(struct reader *r, void *obj, const struct field *fields,
                     size_t nfields)
{
    int rc = json_enter_object(&r->c);
    if (rc != JSON_OK)
        return reader_bad_value(r, rc, "an object");
    const char *key;
    size_t keylen;
    uint64_t seen = 0; /* fields read, for the first 64 of the table */
    while ((rc = json_next_key(&r->c, &key, &keylen)) == 1) {
        const struct field *f = NULL;
        size_t i = 0;
        for (; i < nfields; i++) {
            if (reader_key_is(key, keylen, fields[i].name)) {
                f = &fields[i];
                break;
            }
        }
        if (f == NULL) {
            if (json_skip(&r->c) != JSON_OK)
                return reader_json_failed(r);
            continue;
        }
        reader_push_key(r, f->name);
        /* JSON leaves a repeated key to the reader (Python's json keeps the
         * last, we appended arrays): a file that says two things is refused */
        if (i < 64 && (seen & (UINT64_C(1) << i)))
            return reader_invalid(r, "is given twice in one object (a duplicate key: "
                                     "each JSON reader would read another value)");
        if (i < 64)
            seen |= UINT64_C(1) << i;
        rc = reader_field(r, obj, f);
        reader_pop(r);
        if (rc != 0)
            return rc;
    }
    return rc < 0 ? reader_json_failed(r) : 0;
}

/* Pages of a mapped file are given back in steps of RELEASE_STEP, the
 * last RELEASE_KEEP before the cursor kept (the error path and messages
 * read back from the file what they need). */
#define RELEASE_STEP ((size_t)2 << 20)
#define RELEASE_KEEP ((size_t)1 << 20)

void reader_release_init(struct reader *r)
{
    r->release_from = r->c.buf; /* page-aligned: the start of the mapping */
    r->release_at = r->c.buf + RELEASE_STEP + RELEASE_KEEP;
}

void reader_release(struct reader *r)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    uintptr_t upto = (uintptr_t)(r->c.p - RELEASE_KEEP);
    upto -= upto % (uintptr_t)page;
    if (upto > (uintptr_t)r->release_from) {
        /* Clean private pages: dropped, read again from the file if ever
         * touched again. */
        madvise(r->release_from, upto - (uintptr_t)r->release_from, MADV_DONTNEED);
        r->release_from = (char *)upto;
    }
    r->release_at = r->c.p + RELEASE_STEP;
}

void *reader_append(struct reader *r, void **v, size_t n, size_t *cap, size_t size)
{
    if (snapshot_vec_reserve(v, cap, size, n + 1)) {
        reader_nomem(r);
        return NULL;
    }
    return memset((char *)*v + n * size, 0, size);
}

int reader_array(struct reader *r, void *obj,
                    int (*fn)(struct reader *r, void *obj, size_t i))
{
    int rc = json_enter_array(&r->c);
    if (rc != JSON_OK)
        return reader_bad_value(r, rc, "an array");
    size_t i = 0;
    while ((rc = json_next_element(&r->c)) == 1) {
        reader_push_index(r, i);
        rc = fn(r, obj, i);
        reader_pop(r);
        if (rc != 0)
            return rc;
        if (r->release_at != NULL && r->c.p >= r->release_at)
            reader_release(r);
        i++;
    }
    return rc < 0 ? reader_json_failed(r) : 0;
}

int reader_optional_object(struct reader *r, void *obj, bool *present,
                              const struct field *fields, size_t nfields)
{
    if (reader_take_null(r)) {
        *present = false;
        return 0;
    }
    *present = true;
    return reader_object(r, obj, fields, nfields);
}
