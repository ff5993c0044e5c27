/* jw.h - the snapshot's JSON emitter: a private buffer drained with
 * write(2), never stdio, and integers formatted by hand (jw.c). */
#ifndef CUMEMTRACE_JW_H
#define CUMEMTRACE_JW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One document being written to fd.  The first write error stops all
 * further output and stays in err for the caller. */
struct jw {
    int fd;
    int err;  /* first errno, 0 none */
    size_t n; /* bytes pending in buf */
    char buf[1 << 16];
};

/* Starts writing to fd (nothing is written until the buffer fills or
 * jw_flush). */
void jw_init(struct jw *w, int fd);
/* Writes out what is pending; sets w->err on failure. */
void jw_flush(struct jw *w);
/* Appends len bytes (the slow path of jw_raw). */
void jw_raw_slow(struct jw *w, const char *s, size_t len);

/* Appends len bytes as they are. */
static inline void jw_raw(struct jw *w, const char *s, size_t len)
{
    if (len <= sizeof w->buf - w->n) {
        memcpy(w->buf + w->n, s, len);
        w->n += len;
    } else {
        jw_raw_slow(w, s, len);
    }
}

/* Appends a NUL-terminated literal or fragment as it is. */
static inline void jw_s(struct jw *w, const char *s)
{
    jw_raw(w, s, strlen(s));
}

/* Decimal integers, as printf's %llu / %lld would write them. */
void jw_u64(struct jw *w, uint64_t v);
void jw_i64(struct jw *w, int64_t v);
/* A count that may be unknown: negative is written as null. */
void jw_i64_or_null(struct jw *w, int64_t v);
/* true / false. */
void jw_bool(struct jw *w, bool v);
/* Lower-case hex of n bytes, two digits each (a build-id). */
void jw_hex(struct jw *w, const unsigned char *p, size_t n);
/* A JSON string; NULL becomes null.  Bytes that do not begin well-formed
 * UTF-8 are written as \ufffd (docs/snapshot-format.md, "Strings"). */
void jw_str(struct jw *w, const char *s);

/* Formats v in decimal at the end of b[0..20) and returns where it
 * starts (b + 20 - digits).  For callers that cache formatted text. */
char *jw_u64_digits(char b[20], uint64_t v);

#endif
