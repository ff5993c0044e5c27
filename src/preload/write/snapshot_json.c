/* snapshot_json.c - the snapshot's JSON emitter.
 *
 * Workload: a million-allocation, 100k-stack snapshot is ~140 MB of JSON,
 * millions of integers and strings: the integers are formatted by hand
 * (vsnprintf's format parsing was most of a dump's time) and strings are
 * copied in runs of bytes that need no escape.  Output is byte-identical to
 * what printf's %d / %u / %02x would write (tests/unit/test_snapshot_json.c).
 */
#include "snapshot_json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "utf8.h"

void snapshot_json_init(struct snapshot_json *w, int fd)
{
    w->fd = fd;
    w->err = 0;
    w->n = 0;
}

void snapshot_json_flush(struct snapshot_json *w)
{
    size_t off = 0;
    while (off < w->n && w->err == 0) {
        ssize_t k = write(w->fd, w->buf + off, w->n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            w->err = k < 0 ? errno : EIO;
        else
            off += (size_t)k;
    }
    w->n = 0;
}

void snapshot_json_raw_slow(struct snapshot_json *w, const char *s, size_t len)
{
    while (len > 0) {
        if (w->n == sizeof w->buf)
            snapshot_json_flush(w);
        size_t k = sizeof w->buf - w->n;
        if (k > len)
            k = len;
        memcpy(w->buf + w->n, s, k);
        w->n += k;
        s += k;
        len -= k;
    }
}

/* Two digits at a time: half the divisions of one at a time. */
static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                               "25262728293031323334353637383940414243444546474849"
                               "50515253545556575859606162636465666768697071727374"
                               "75767778798081828384858687888990919293949596979899";

/* Writes the digits of x backwards, ending just before `end`; returns
 * where they start.  32-bit arithmetic: most numbers fit. */
static inline __attribute__((always_inline)) char *digits_before(char *end, uint32_t x)
{
    char *p = end;
    while (x >= 100) {
        unsigned r = x % 100;
        x /= 100;
        p -= 2;
        memcpy(p, pairs + 2 * r, 2);
    }
    if (x >= 10) {
        p -= 2;
        memcpy(p, pairs + 2 * x, 2);
    } else {
        *--p = (char)('0' + x);
    }
    return p;
}

/* Formats v in decimal at the end of b[0..20) and returns where it
 * starts (b + 20 - digits).  For callers that cache formatted text. */
static char *snapshot_json_u64_digits(char b[20], uint64_t v)
{
    char *p = b + 20;
    while (v > UINT32_MAX) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        p -= 2;
        memcpy(p, pairs + 2 * r, 2);
    }
    return digits_before(p, (uint32_t)v);
}

/* Decimal digits of v, 1 to 10. */
static inline unsigned digits32(uint32_t v)
{
    return v < 100000 ? (v < 100 ? 1 + (v >= 10) : v < 1000 ? 3 : 4 + (v >= 10000))
                      : (v < 10000000 ? 6 + (v >= 1000000)
                                      : v < 100000000 ? 8 : 9 + (v >= 1000000000));
}

/* The rare cases: a full buffer, and numbers of 2^32 and over. */
static __attribute__((noinline)) void u64_slow(struct snapshot_json *w, uint64_t v)
{
    char b[20];
    char *p = snapshot_json_u64_digits(b, v);
    snapshot_json_raw(w, p, (size_t)(b + sizeof b - p));
}

/* Straight into the buffer when it has room, in 32-bit arithmetic when
 * the number fits: a big snapshot formats ~1.2 M numbers, most small. */
void snapshot_json_u64(struct snapshot_json *w, uint64_t v)
{
    if (__builtin_expect(v > UINT32_MAX || sizeof w->buf - w->n < 10, 0)) {
        u64_slow(w, v);
        return;
    }
    uint32_t x = (uint32_t)v;
    w->n += digits32(x);
    digits_before(w->buf + w->n, x);
}

void snapshot_json_i64(struct snapshot_json *w, int64_t v)
{
    if (v < 0) {
        snapshot_json_raw(w, "-", 1);
        snapshot_json_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        snapshot_json_u64(w, (uint64_t)v);
    }
}

void snapshot_json_i64_or_null(struct snapshot_json *w, int64_t v)
{
    if (v < 0)
        snapshot_json_raw(w, "null", 4);
    else
        snapshot_json_u64(w, (uint64_t)v);
}

void snapshot_json_bool(struct snapshot_json *w, bool v)
{
    if (v)
        snapshot_json_raw(w, "true", 4);
    else
        snapshot_json_raw(w, "false", 5);
}

static const char hexdigits[] = "0123456789abcdef";

void snapshot_json_hex(struct snapshot_json *w, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char h[2] = {hexdigits[p[i] >> 4], hexdigits[p[i] & 15]};
        snapshot_json_raw(w, h, 2);
    }
}

/* A byte written as it is: printable ASCII other than the quote and the
 * backslash. */
static inline bool plain(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

void snapshot_json_str(struct snapshot_json *w, const char *s)
{
    if (s == NULL)
        snapshot_json_raw(w, "null", 4);
    else
        snapshot_json_strn(w, s, strlen(s));
}

void snapshot_json_strn(struct snapshot_json *w, const char *s, size_t left)
{
    snapshot_json_raw(w, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (left > 0) {
        size_t run = 0;
        while (run < left && plain(p[run]))
            run++;
        if (run > 0) {
            snapshot_json_raw(w, (const char *)p, run);
            p += run;
            left -= run;
            continue;
        }
        uint32_t cp;
        size_t k = utf8_decode(p, left, &cp);
        if (k == 0) {
            snapshot_json_raw(w, "\\ufffd", 6);
            k = 1;
        } else if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            snapshot_json_raw(w, e, 2);
        } else if (*p < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hexdigits[*p >> 4], hexdigits[*p & 15]};
            snapshot_json_raw(w, e, 6);
        } else {
            snapshot_json_raw(w, (const char *)p, k);
        }
        p += k;
        left -= k;
    }
    snapshot_json_raw(w, "\"", 1);
}

void snapshot_json_printf(struct snapshot_json *w, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k > 0)
        snapshot_json_raw(w, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}
