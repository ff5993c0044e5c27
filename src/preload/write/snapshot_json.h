/* snapshot_json.h - the snapshot's JSON emitter: a private buffer drained with
 * write(2), never stdio, and integers formatted by hand (snapshot_json.c). */
#ifndef CUMEMTRACE_SNAPSHOT_JSON_H
#define CUMEMTRACE_SNAPSHOT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One document being written to fd.  The first write error stops all
 * further output and stays in err for the caller. */
struct snapshot_json {
    int fd;
    int err;  /* first errno, 0 none */
    size_t n; /* bytes pending in buf */
    char buf[1 << 16];
};

/* Starts writing to fd (nothing is written until the buffer fills or
 * snapshot_json_flush). */
void snapshot_json_init(struct snapshot_json *w, int fd);
/* Writes out what is pending; sets w->err on failure. */
void snapshot_json_flush(struct snapshot_json *w);
/* Appends len bytes (the slow path of snapshot_json_raw). */
void snapshot_json_raw_slow(struct snapshot_json *w, const char *s, size_t len);

/* Appends len bytes as they are. */
static inline void snapshot_json_raw(struct snapshot_json *w, const char *s, size_t len)
{
    if (len <= sizeof w->buf - w->n) {
        memcpy(w->buf + w->n, s, len);
        w->n += len;
    } else {
        snapshot_json_raw_slow(w, s, len);
    }
}

/* Appends a NUL-terminated literal or fragment as it is. */
static inline void snapshot_json_s(struct snapshot_json *w, const char *s)
{
    snapshot_json_raw(w, s, strlen(s));
}

/* Decimal integers, as printf's %llu / %lld would write them. */
void snapshot_json_u64(struct snapshot_json *w, uint64_t v);
void snapshot_json_i64(struct snapshot_json *w, int64_t v);
/* A count that may be unknown: negative is written as null. */
void snapshot_json_i64_or_null(struct snapshot_json *w, int64_t v);
/* true / false. */
void snapshot_json_bool(struct snapshot_json *w, bool v);
/* Lower-case hex of n bytes, two digits each (a build-id). */
void snapshot_json_hex(struct snapshot_json *w, const unsigned char *p, size_t n);
/* A JSON string; NULL becomes null.  Bytes that do not begin well-formed
 * UTF-8 are written as \ufffd (docs/snapshot-format.md, "Strings"). */
void snapshot_json_str(struct snapshot_json *w, const char *s);
/* The same of s[0..n), which need not end in a NUL. */
void snapshot_json_strn(struct snapshot_json *w, const char *s, size_t n);
/* printf's formatting, for pieces off the hot path (at most 1023 bytes). */
void snapshot_json_printf(struct snapshot_json *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
