/* json.c - see json.h for the contract.
 *
 * Every scanning loop stops at the '\0' sentinel at buf[len]; whether that
 * NUL is the end of the input (truncated: JSON_ETRUNC) or a NUL byte inside
 * the file (not JSON: JSON_ESYNTAX) is decided by comparing with `end` only
 * there, so the hot loops carry no bounds check.
 */
#include "json.h"
#include "json_lane.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LEVEL_FIRST 1u
#define LEVEL_OBJECT 2u

/* Bytes that end the fast scan of a string: the quote, the backslash,
 * control characters (forbidden raw) and the NUL sentinel. */
static unsigned char string_stop[256];
static int string_stop_ready;

static void init_tables(void)
{
    if (string_stop_ready)
        return;
    for (int i = 0; i < 0x20; i++)
        string_stop[i] = 1;
    string_stop['"'] = 1;
    string_stop['\\'] = 1;
    string_stop_ready = 1;
}

void json_init(struct json_cursor *c, char *buf, size_t len,
               struct arena *arena, bool insitu)
{
    init_tables();
    c->buf = buf;
    c->end = buf + len;
    c->p = buf;
    c->arena = arena;
    c->insitu = insitu;
    c->status = JSON_OK;
    c->err_offset = 0;
    c->err_msg[0] = '\0';
    c->depth = 0;
    if (len >= 3 && (unsigned char)buf[0] == 0xef &&
        (unsigned char)buf[1] == 0xbb && (unsigned char)buf[2] == 0xbf)
        c->p += 3;
}

static int fail(struct json_cursor *c, int status, const char *at,
                const char *fmt, ...)
{
    if (c->status != JSON_OK)
        return c->status;
    c->status = status;
    c->err_offset = (size_t)(at - c->buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err_msg, sizeof c->err_msg, fmt, ap);
    va_end(ap);
    return status;
}

/* Describes the byte at p for a message: 'x' or byte 0x0a. */
static const char *show(const char *p, char *buf, size_t n)
{
    unsigned char ch = (unsigned char)*p;
    if (ch > 0x20 && ch < 0x7f)
        snprintf(buf, n, "'%c'", ch);
    else
        snprintf(buf, n, "byte 0x%02x", ch);
    return buf;
}

/* The input stopped where `what` was expected: truncated at the real end,
 * otherwise the byte there is wrong. */
static int unexpected(struct json_cursor *c, const char *p, const char *what)
{
    if (p >= c->end)
        return fail(c, JSON_ETRUNC, p, "unexpected end of input (expected %s)",
                    what);
    char b[16];
    return fail(c, JSON_ESYNTAX, p, "expected %s, found %s", what,
                show(p, b, sizeof b));
}

static inline void skip_ws(struct json_cursor *c)
{
    char *p = c->p;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    c->p = p;
}

enum json_type json_peek(struct json_cursor *c)
{
    if (c->status != JSON_OK)
        return JSON_INVALID;
    skip_ws(c);
    switch (*c->p) {
    case '{':
        return JSON_OBJECT;
    case '[':
        return JSON_ARRAY;
    case '"':
        return JSON_STRING;
    case 't':
    case 'f':
        return JSON_BOOL;
    case 'n':
        return JSON_NULL;
    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return JSON_NUMBER;
    default:
        unexpected(c, c->p, "a value");
        return JSON_INVALID;
    }
}

/* JSON_OK when the next value is of type want; JSON_ETYPE (nothing read)
 * when it is another, the sticky error when there is none. */
static int expect(struct json_cursor *c, enum json_type want)
{
    enum json_type t = json_peek(c);
    if (t == JSON_INVALID)
        return c->status;
    return t == want ? JSON_OK : JSON_ETYPE;
}

/* ---- literals ---- */

static int literal(struct json_cursor *c, const char *word)
{
    char *p = c->p;
    for (const char *w = word; *w; w++, p++) {
        if (*p != *w) {
            if (p >= c->end)
                return fail(c, JSON_ETRUNC, p, "unexpected end of input in '%s'",
                            word);
            char b[16];
            return fail(c, JSON_ESYNTAX, c->p, "invalid literal (expected '%s'), found %s",
                        word, show(p, b, sizeof b));
        }
    }
    c->p = p;
    return JSON_OK;
}

int json_get_null(struct json_cursor *c)
{
    int rc = expect(c, JSON_NULL);
    return rc != JSON_OK ? rc : literal(c, "null");
}

int json_get_bool(struct json_cursor *c, bool *out)
{
    int rc = expect(c, JSON_BOOL);
    if (rc != JSON_OK)
        return rc;
    bool v = *c->p == 't';
    rc = literal(c, v ? "true" : "false");
    if (rc == JSON_OK)
        *out = v;
    return rc;
}

/* ---- numbers ---- */

struct number {
    const char *start; /* first byte (the '-' if any) */
    const char *stop;  /* one past the last byte */
    uint64_t mag;      /* |integer part|, valid when !overflow */
    bool neg;
    bool integer;      /* no fraction, no exponent */
    bool overflow;     /* integer part exceeds UINT64_MAX */
};

static inline bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Scans the number at c->p without consuming it. */
static int scan_number(struct json_cursor *c, struct number *n)
{
    const char *p = c->p;
    n->start = p;
    n->neg = false;
    n->integer = true;
    n->overflow = false;
    n->mag = 0;
    if (*p == '-') {
        n->neg = true;
        p++;
    }
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        /* 19 digits always fit in 64 bits: check for overflow only past
         * them. */
        const char *digits = p;
        uint64_t m = 0;
        while (is_digit(*p) && p - digits < 19)
            m = m * 10 + (unsigned)(*p++ - '0');
        while (is_digit(*p)) {
            unsigned d = (unsigned)(*p - '0');
            if (m > (UINT64_MAX - d) / 10)
                n->overflow = true;
            else
                m = m * 10 + d;
            p++;
        }
        n->mag = m;
    } else {
        return unexpected(c, p, "a digit");
    }
    if (*p == '.') {
        n->integer = false;
        p++;
        if (!is_digit(*p))
            return unexpected(c, p, "a digit after '.'");
        while (is_digit(*p))
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        n->integer = false;
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!is_digit(*p))
            return unexpected(c, p, "a digit in the exponent");
        while (is_digit(*p))
            p++;
    }
    n->stop = p;
    return JSON_OK;
}

static int number_at(struct json_cursor *c, struct number *n)
{
    int rc = expect(c, JSON_NUMBER);
    return rc != JSON_OK ? rc : scan_number(c, n);
}

int json_get_int64(struct json_cursor *c, int64_t *out)
{
    if (c->status == JSON_OK) { /* the fast lane: a plain integer */
        skip_ws(c);
        int64_t v;
        const char *q = lane_i64(c->p, c->end, &v);
        if (q != NULL) {
            *out = v;
            c->p = (char *)q;
            return JSON_OK;
        }
    }
    struct number n;
    int rc = number_at(c, &n);
    if (rc != JSON_OK)
        return rc;
    if (!n.integer || n.overflow || !lane_to_i64(n.neg, n.mag, out))
        return JSON_ERANGE;
    c->p = (char *)n.stop;
    return JSON_OK;
}

int json_get_uint64(struct json_cursor *c, uint64_t *out)
{
    if (c->status == JSON_OK) {
        skip_ws(c);
        uint64_t v;
        const char *q = lane_u64(c->p, c->end, &v);
        if (q != NULL) {
            *out = v;
            c->p = (char *)q;
            return JSON_OK;
        }
    }
    struct number n;
    int rc = number_at(c, &n);
    if (rc != JSON_OK)
        return rc;
    if (!n.integer || n.overflow || (n.neg && n.mag != 0))
        return JSON_ERANGE;
    *out = n.mag;
    c->p = (char *)n.stop;
    return JSON_OK;
}

/* ---- strings ---- */

static int hex4(struct json_cursor *c, const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            d = (unsigned)(ch - 'A' + 10);
        else
            return unexpected(c, p + i, "a hex digit in \\u escape");
        v = v * 16 + d;
    }
    *out = v;
    return JSON_OK;
}

static char *put_utf8(char *w, unsigned cp)
{
    if (cp < 0x80) {
        *w++ = (char)cp;
    } else if (cp < 0x800) {
        *w++ = (char)(0xc0 | (cp >> 6));
        *w++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *w++ = (char)(0xe0 | (cp >> 12));
        *w++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *w++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *w++ = (char)(0xf0 | (cp >> 18));
        *w++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *w++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *w++ = (char)(0x80 | (cp & 0x3f));
    }
    return w;
}

/* Reads one escape at p (just after the backslash).  Stores the decoded
 * bytes at *w when w is not NULL; returns the byte after the escape or
 * NULL with the cursor failed. */
static const char *escape(struct json_cursor *c, const char *p, char **w)
{
    char ch;
    switch (*p) {
    case '"': ch = '"'; break;
    case '\\': ch = '\\'; break;
    case '/': ch = '/'; break;
    case 'b': ch = '\b'; break;
    case 'f': ch = '\f'; break;
    case 'n': ch = '\n'; break;
    case 'r': ch = '\r'; break;
    case 't': ch = '\t'; break;
    case 'u': {
        unsigned cp, lo;
        if (hex4(c, p + 1, &cp) != JSON_OK)
            return NULL;
        p += 5;
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            fail(c, JSON_ESYNTAX, p - 6, "unpaired surrogate in \\u escape");
            return NULL;
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (p[0] != '\\' || p[1] != 'u') {
                if (p >= c->end || (p[0] == '\\' && p + 1 >= c->end))
                    fail(c, JSON_ETRUNC, p, "unexpected end of input in string");
                else
                    fail(c, JSON_ESYNTAX, p - 6, "unpaired surrogate in \\u escape");
                return NULL;
            }
            if (hex4(c, p + 2, &lo) != JSON_OK)
                return NULL;
            if (lo < 0xdc00 || lo > 0xdfff) {
                fail(c, JSON_ESYNTAX, p, "unpaired surrogate in \\u escape");
                return NULL;
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
        }
        if (w != NULL)
            *w = put_utf8(*w, cp);
        return p;
    }
    default:
        if (p >= c->end)
            fail(c, JSON_ETRUNC, p, "unexpected end of input in string");
        else {
            char b[16];
            fail(c, JSON_ESYNTAX, p - 1, "invalid escape \\%s",
                 show(p, b, sizeof b));
        }
        return NULL;
    }
    if (w != NULL)
        *(*w)++ = ch;
    return p + 1;
}

/* Skips string bytes that need no attention: returns the first quote,
 * backslash or control character (or the sentinel) at or after p. */
static inline char *string_run(char *p, const char *end)
{
    p = (char *)lane_string_run(p, end);
    while (!string_stop[(unsigned char)*p])
        p++;
    return p;
}

/* Scans the string whose opening quote is at c->p.  With out == NULL it
 * only validates; otherwise it returns the decoded string (see json.h for
 * where it lives).  Consumes the string on success. */
/* How scan_string hands a string out. */
enum str_as {
    AS_STRING, /* NUL-terminated (insitu: in place; else a copy) */
    AS_SPAN,   /* in place, not terminated, when it has no escape */
    AS_KEY,    /* as AS_SPAN, a decoded key cut at its first NUL */
};

static int scan_string_as(struct json_cursor *c, const char **out, size_t *outlen,
                          enum str_as as)
{
    char *start = c->p + 1;
    char *p = start;
    bool escaped = false;
    for (;;) {
        p = string_run(p, c->end);
        if (*p == '"')
            break;
        if (*p == '\\') {
            escaped = true;
            p = (char *)escape(c, p + 1, NULL);
            if (p == NULL)
                return c->status;
            continue;
        }
        if (p >= c->end)
            return fail(c, JSON_ETRUNC, p, "unexpected end of input in string");
        return fail(c, JSON_ESYNTAX, p,
                    "control character 0x%02x in string (must be escaped)",
                    (unsigned char)*p);
    }
    size_t raw = (size_t)(p - start);
    c->p = p + 1;
    if (out == NULL)
        return JSON_OK;
    if (!escaped) {
        if (as != AS_STRING) {
            *out = start;
        } else if (c->insitu) {
            *p = '\0';
            *out = start;
        } else {
            *out = arena_strndup(c->arena, start, raw);
            if (*out == NULL)
                return fail(c, JSON_ENOMEM, start, "out of memory");
        }
        *outlen = raw;
        return JSON_OK;
    }
    /* Decoding never lengthens: every escape is at least as long as the
     * UTF-8 it stands for. */
    char *dst = arena_alloc(c->arena, raw + 1);
    if (dst == NULL)
        return fail(c, JSON_ENOMEM, start, "out of memory");
    char *w = dst;
    for (const char *r = start; r < p;) {
        if (*r == '\\') {
            r = escape(c, r + 1, &w);
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    *out = dst;
    *outlen = as == AS_KEY ? strlen(dst) : (size_t)(w - dst);
    return JSON_OK;
}

static int scan_string(struct json_cursor *c, const char **out, size_t *outlen)
{
    return scan_string_as(c, out, outlen, AS_STRING);
}

int json_get_string(struct json_cursor *c, const char **s, size_t *len)
{
    size_t n;
    int rc = expect(c, JSON_STRING);
    return rc != JSON_OK ? rc : scan_string(c, s, len ? len : &n);
}

int json_get_span(struct json_cursor *c, const char **s, size_t *len)
{
    int rc = expect(c, JSON_STRING);
    return rc != JSON_OK ? rc : scan_string_as(c, s, len, AS_SPAN);
}

/* ---- containers ---- */

static int enter(struct json_cursor *c, enum json_type want, unsigned char flags)
{
    int rc = expect(c, want);
    if (rc != JSON_OK)
        return rc;
    if (c->depth >= JSON_MAX_DEPTH)
        return fail(c, JSON_EDEPTH, c->p, "nested deeper than %d levels",
                    JSON_MAX_DEPTH);
    c->level[c->depth++] = (unsigned char)(LEVEL_FIRST | flags);
    c->p++;
    return JSON_OK;
}

int json_enter_array(struct json_cursor *c)
{
    return enter(c, JSON_ARRAY, 0);
}

int json_enter_object(struct json_cursor *c)
{
    return enter(c, JSON_OBJECT, LEVEL_OBJECT);
}

/* Shared by both containers: consumes the closing bracket (returns 0) or
 * the separating comma (returns 1). */
static int next_in(struct json_cursor *c, char close, const char *what)
{
    if (c->status != JSON_OK)
        return c->status;
    skip_ws(c);
    unsigned char *lv = &c->level[c->depth - 1];
    if (*c->p == close) {
        c->p++;
        c->depth--;
        return 0;
    }
    if (!(*lv & LEVEL_FIRST)) {
        if (*c->p != ',')
            return unexpected(c, c->p, what);
        c->p++;
        skip_ws(c);
        if (*c->p == close) {
            char b[16];
            return fail(c, JSON_ESYNTAX, c->p, "expected a value after ',', found %s",
                        show(c->p, b, sizeof b));
        }
    }
    *lv &= (unsigned char)~LEVEL_FIRST;
    return 1;
}

int json_next_element(struct json_cursor *c)
{
    /* the common case first: a comma after an element, then a value */
    char *p = c->p;
    if (c->status == JSON_OK && *p == ',' && c->depth > 0 &&
        !(c->level[c->depth - 1] & LEVEL_FIRST)) {
        p = (char *)lane_ws(p + 1);
        if (*p != ']') {
            c->p = p;
            return 1;
        }
    }
    return next_in(c, ']', "',' or ']'");
}

static int next_member(struct json_cursor *c, const char **key, size_t *keylen,
                       enum str_as as)
{
    int rc = next_in(c, '}', "',' or '}'");
    if (rc != 1)
        return rc;
    if (*c->p != '"')
        return unexpected(c, c->p, "a string key");
    size_t n;
    const char *q = as != AS_STRING ? lane_span(c->p, c->end, key, keylen ? keylen : &n)
                                    : NULL;
    if (q != NULL) /* a key without escapes, handed out in place */
        c->p = (char *)q;
    else if ((rc = scan_string_as(c, key, keylen ? keylen : &n, as)) != JSON_OK)
        return rc;
    skip_ws(c);
    if (*c->p != ':')
        return unexpected(c, c->p, "':' after the key");
    c->p++;
    return 1;
}

int json_next_member(struct json_cursor *c, const char **key, size_t *keylen)
{
    return next_member(c, key, keylen, AS_STRING);
}

int json_next_key(struct json_cursor *c, const char **key, size_t *keylen)
{
    return next_member(c, key, keylen, AS_KEY);
}

int json_skip(struct json_cursor *c)
{
    unsigned base = c->depth;
    for (;;) {
        /* A value is expected here. */
        enum json_type t = json_peek(c);
        int rc;
        switch (t) {
        case JSON_INVALID:
            return c->status;
        case JSON_OBJECT:
            rc = json_enter_object(c);
            break;
        case JSON_ARRAY:
            rc = json_enter_array(c);
            break;
        case JSON_STRING:
            rc = scan_string(c, NULL, NULL);
            break;
        case JSON_NUMBER: {
            struct number n;
            rc = scan_number(c, &n);
            if (rc == JSON_OK)
                c->p = (char *)n.stop;
            break;
        }
        case JSON_BOOL:
            rc = literal(c, *c->p == 't' ? "true" : "false");
            break;
        default:
            rc = literal(c, "null");
            break;
        }
        if (rc != JSON_OK)
            return rc;
        /* Close every container that ends here, until one has more. */
        for (;;) {
            if (c->depth == base)
                return JSON_OK;
            if (c->level[c->depth - 1] & LEVEL_OBJECT)
                rc = json_next_member(c, NULL, NULL);
            else
                rc = json_next_element(c);
            if (rc < 0)
                return rc;
            if (rc == 1)
                break;
        }
    }
}

int json_finish(struct json_cursor *c)
{
    if (c->status != JSON_OK)
        return c->status;
    skip_ws(c);
    if (c->p < c->end) {
        char b[16];
        return fail(c, JSON_ESYNTAX, c->p,
                    "unexpected %s after the end of the document",
                    show(c->p, b, sizeof b));
    }
    return JSON_OK;
}

size_t json_offset(const struct json_cursor *c)
{
    return (size_t)(c->p - c->buf);
}

void json_line_col(const char *buf, size_t offset, unsigned long *line,
                   unsigned long *col)
{
    unsigned long l = 1;
    const char *line_start = buf;
    const char *stop = buf + offset;
    for (const char *p = buf; p < stop; p++) {
        p = memchr(p, '\n', (size_t)(stop - p));
        if (p == NULL)
            break;
        l++;
        line_start = p + 1;
    }
    *line = l;
    *col = (unsigned long)(stop - line_start) + 1;
}

