/* json_lane.h - the fast lane of the JSON reader: the common shapes of the
 * bulk sections (plain integers, strings without escapes), read in a few
 * instructions a byte, for json.c's getters and the bulk readers' rows.
 *
 * Contract of every lane_* function: given p (a position in a buffer whose
 * byte at end is the '\0' sentinel) it either recognises exactly the shape
 * it names and returns the position after it, or returns NULL and has
 * claimed nothing.  A lane never fails a cursor and never makes a message:
 * on NULL the caller reads the same bytes the ordinary way (json.c), which
 * accepts everything a lane accepts with the same result, and gives the
 * one message for what a lane refused.  So a lane may refuse anything it
 * finds unusual (a 20-digit number, an escape, the last 8 bytes of the
 * buffer) at no cost in correctness.
 *
 * Eight bytes are read at once only where they lie wholly before end (the
 * buffer need hold nothing past its sentinel).  Little-endian only: on a
 * big-endian machine the digit lane refuses and the ordinary path reads.
 */
#ifndef CUMEMTRACE_CLI_JSON_LANE_H
#define CUMEMTRACE_CLI_JSON_LANE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "hmap.h"

#define LANE_ONES 0x0101010101010101ULL
#define LANE_HIGHS 0x8080808080808080ULL

/* Inlined into each row reader whatever the compiler's estimate: a call
 * would cost a third of what reading a number costs. */
#define LANE_INLINE static inline __attribute__((always_inline))

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LANE_LE 1
#else
#define LANE_LE 0
#endif

/* Nonzero where a byte of x is zero: exact for the lowest such byte (a
 * borrow only runs upwards from a byte that is itself flagged). */
LANE_INLINE uint64_t lane_has_zero(uint64_t x)
{
    return (x - LANE_ONES) & ~x & LANE_HIGHS;
}

LANE_INLINE const char *lane_ws(const char *p)
{
    if ((unsigned char)*p > ' ') /* what the writer puts here: no space */
        return p;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

/* Nonzero where a byte of x (a word XOR '0' bytes, a digit then 0..9) is
 * no digit: its high nibble is set or it is 10..15.  A carry out of a
 * non-digit byte only flags bytes above it, so the lowest flag is exact. */
LANE_INLINE uint64_t lane_not_digits(uint64_t x)
{
    return (x & 0xf0f0f0f0f0f0f0f0ULL) | ((x + LANE_ONES * 6) & 0x1010101010101010ULL);
}

/* The value of the 8 decimal digits in x (digit values 0..9 in its bytes,
 * the first, most significant, in the lowest byte): three multiply-and-add
 * steps combining neighbours into 2-, 4- and 8-digit lanes. */
LANE_INLINE uint64_t lane_eight(uint64_t x)
{
    x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffULL;
    x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffULL;
    return (x * 10000 + (x >> 32)) & 0xffffffffULL;
}

/* The digits at p (at least one, at most 19: they always fit 64 bits) as a
 * number in *out; NULL when there are none, more than 19, or fewer than 8
 * bytes are left before end. */
LANE_INLINE const char *lane_digits(const char *p, const char *end, uint64_t *out)
{
#if LANE_LE
    static const uint64_t pow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000,
                                      10000000, 100000000};
    const char *start = p;
    uint64_t m = 0;
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t x = w ^ (LANE_ONES * '0'); /* a digit byte becomes 0..9 */
        uint64_t stop = lane_not_digits(x);
        unsigned k = stop ? (unsigned)__builtin_ctzll(stop) >> 3 : 8;
        if (k > 0)
            m = m * pow10[k] + lane_eight(x << (8 * (8 - k)));
        p += k;
        if (p - start > 19)
            return NULL; /* m wrapped: the ordinary path says how */
        if (k < 8) {
            if (p == start)
                return NULL;
            *out = m;
            return p;
        }
    }
#else
    (void)p;
    (void)end;
    (void)out;
#endif
    return NULL;
}

/* Whether a number continues at p past its integer digits (a fraction or
 * an exponent): then it is no plain integer. */
LANE_INLINE bool lane_number_goes_on(const char *p)
{
    unsigned char c = (unsigned char)*p;
    return c == '.' || (c | 0x20) == 'e'; /* 'e' or 'E' */
}

/* A plain non-negative integer ("0" or no leading zero, no fraction, no
 * exponent, no sign) that fits uint64. */
LANE_INLINE const char *lane_u64(const char *p, const char *end, uint64_t *out)
{
    if (*p == '0') {
        if (p[1] >= '0' && p[1] <= '9')
            return NULL;
        *out = 0;
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p = lane_digits(p, end, out);
        if (p == NULL)
            return NULL;
    } else {
        return NULL;
    }
    return lane_number_goes_on(p) ? NULL : p;
}

/* The magnitude m, negative when neg, in *out; false when it does not fit
 * int64. */
LANE_INLINE bool lane_to_i64(bool neg, uint64_t m, int64_t *out)
{
    if (m > (uint64_t)INT64_MAX + neg)
        return false;
    *out = !neg ? (int64_t)m : m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
    return true;
}

/* A plain integer, '-' allowed, that fits int64. */
LANE_INLINE const char *lane_i64(const char *p, const char *end, int64_t *out)
{
    bool neg = *p == '-';
    uint64_t m;
    p = lane_u64(p + neg, end, &m);
    return p != NULL && lane_to_i64(neg, m, out) ? p : NULL;
}

/* A plain integer (sign allowed when neg) of at most 18 digits, checked
 * and not converted: every such number fits int64 and uint64, so a reader
 * that needs only to know the value is an integer of its type (a row it
 * does not keep) can stop here.  The digits are found 8 bytes a step as in
 * lane_digits. */
LANE_INLINE const char *lane_int_syntax(const char *p, const char *end, bool neg)
{
#if LANE_LE
    if (neg && *p == '-')
        p++;
    if (*p == '0')
        return (p[1] >= '0' && p[1] <= '9') || lane_number_goes_on(p + 1) ? NULL : p + 1;
    if (*p < '1' || *p > '9')
        return NULL;
    const char *start = p;
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t stop = lane_not_digits(w ^ (LANE_ONES * '0'));
        if (stop != 0) {
            p += __builtin_ctzll(stop) >> 3;
            return p - start > 18 || lane_number_goes_on(p) ? NULL : p;
        }
        p += 8;
        if (p - start > 18)
            return NULL;
    }
#else
    (void)p;
    (void)end;
    (void)neg;
#endif
    return NULL;
}

/* Past the string bytes at p that need no attention, 8 at a time while
 * they lie wholly before end: at the first quote, backslash or control
 * character among them, else where fewer than 8 bytes are left (the caller
 * goes on a byte at a time). */
LANE_INLINE const char *lane_string_run(const char *p, const char *end)
{
#if LANE_LE
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t stop = lane_has_zero(w ^ (LANE_ONES * '"')) |
                        lane_has_zero(w ^ (LANE_ONES * '\\')) |
                        ((w - LANE_ONES * 0x20) & ~w & LANE_HIGHS);
        if (stop != 0)
            return p + (__builtin_ctzll(stop) >> 3);
        p += 8;
    }
#else
    (void)end;
#endif
    return p;
}

/* A string at p (its opening quote) without escapes or control
 * characters: its bytes in *s, *n (in the buffer, not terminated). */
LANE_INLINE const char *lane_span(const char *p, const char *end, const char **s,
                                    size_t *n)
{
    if (*p != '"')
        return NULL;
    const char *q = lane_string_run(++p, end);
    while (*q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
    if (*q != '"')
        return NULL;
    *s = p;
    *n = (size_t)(q - p);
    return q + 1;
}

/* The literal null (byte by byte: the sentinel stops it at the end). */
LANE_INLINE const char *lane_null(const char *p)
{
    return p[0] == 'n' && p[1] == 'u' && p[2] == 'l' && p[3] == 'l' ? p + 4 : NULL;
}

/* One step of lane_object_hash: a rotation before the multiply, so that a
 * difference in high bits reaches the low ones and two cannot cancel. */
LANE_INLINE uint64_t lane_hash_step(uint64_t h, const char *q)
{
    uint64_t w;
    memcpy(&w, q, 8);
    h ^= w;
    return ((h << 29) | (h >> 35)) * 0x100000001b3ULL;
}

/* The object at p ('{') up to its first '}' and a hash of them: its
 * length, or 0 when p holds no '{' or no '}' follows.  The search is
 * memchr's (vector code); the hash takes 8 bytes a step in two independent
 * chains, the last word overlapping the one before instead of a
 * byte-by-byte tail.  *hash is this function's
 * own: a map keyed by it is hashed by it alone (hmap's *_hashed calls). */
LANE_INLINE size_t lane_object_hash(const char *p, const char *end, uint64_t *hash)
{
    if (*p != '{')
        return 0;
    const char *close = memchr(p, '}', (size_t)(end - p));
    if (close == NULL)
        return 0;
    size_t n = (size_t)(close + 1 - p);
    uint64_t a = 0x9e3779b97f4a7c15ULL ^ n, b = 0xc2b2ae3d27d4eb4fULL;
    if (n >= 8) {
        const char *q = p, *last = close - 7; /* the last 8 bytes */
        for (; last - q > 8; q += 16) {
            a = lane_hash_step(a, q);
            b = lane_hash_step(b, q + 8);
        }
        if (q < last)
            a = lane_hash_step(a, q);
        b = lane_hash_step(b, last);
    } else {
        char w[8] = {0};
        memcpy(w, p, n);
        a = lane_hash_step(a, w);
    }
    *hash = hmap_mix(a ^ ((b << 31) | (b >> 33))); /* the low bits index the table */
    return n;
}

#endif
