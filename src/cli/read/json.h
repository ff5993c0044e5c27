/* json.h - a strict pull parser for JSON (RFC 8259) over a buffer in memory.
 *
 * Why a pull parser: a snapshot of a large job is hundreds of megabytes,
 * mostly stack frames.  A tree of the whole document would cost several
 * times the file in memory; pulling values lets the snapshot reader turn
 * each frame straight into its compact model and keep nothing else.
 *
 * Usage: json_init() on a buffer whose byte at [len] is '\0', then ask for
 * what you expect: json_peek() tells the type of the next value,
 * json_get_*() consume a scalar, json_enter_*() + json_next_*() walk a
 * container, json_skip() consumes any value (validating it).  After
 * json_next_element()/json_next_member() returned 1 the caller must
 * consume exactly one value.
 *
 * Errors: JSON_ETRUNC when the input ends inside a value (a file cut short),
 * JSON_ESYNTAX for anything else that is not JSON, JSON_EDEPTH past
 * JSON_MAX_DEPTH nested containers.  These are sticky: every later call
 * returns the same error, and json_error_offset() says where.  A getter
 * asked for the wrong type returns JSON_ETYPE (or JSON_ERANGE for a number
 * that does not fit) without consuming anything and without making the
 * cursor fail: the caller decides whether that is an error.
 *
 * Numbers: integers are converted exactly to int64/uint64 (sizes exceed
 * 2^53, which a double cannot hold); the format has no fractions, so a
 * number with one or an exponent reads as JSON_ERANGE.
 *
 * Strings: the parser writes a NUL over the closing quote and hands out a
 * pointer into the buffer (no copy) when the string has no escapes; strings
 * with escapes are decoded into the arena.  With insitu false (used by a
 * pass that must leave the buffer intact) every string is copied.  Raw
 * bytes >= 0x80 are passed through unchecked; \u escapes are decoded to
 * UTF-8 and an unpaired surrogate is an error.
 */
#ifndef CUMEMTRACE_CLI_JSON_H
#define CUMEMTRACE_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

/* Deeper than any snapshot (about 6), shallow enough that a hostile file
 * cannot make the per-level bookkeeping large. */
#define JSON_MAX_DEPTH 512

enum json_type {
    JSON_INVALID = 0, /* the cursor failed; see json_status() */
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
};

enum json_status {
    JSON_OK = 0,
    JSON_ESYNTAX = -1, /* not JSON at the error offset */
    JSON_ETRUNC = -2,  /* the input ends inside a value */
    JSON_EDEPTH = -3,  /* nested deeper than JSON_MAX_DEPTH */
    JSON_ENOMEM = -4,  /* the arena could not grow */
    JSON_ETYPE = -5,   /* (not sticky) the value has another type */
    JSON_ERANGE = -6   /* (not sticky) the number does not fit the type */
};

struct json_cursor {
    char *buf;          /* start of the document */
    const char *end;    /* buf + len; *end == '\0' */
    char *p;            /* next unread byte */
    struct arena *arena; /* decoded strings */
    bool insitu;        /* may write NULs into buf */
    int status;         /* JSON_OK or the sticky error */
    size_t err_offset;  /* byte offset of the error */
    char err_msg[80];   /* what was wrong there */
    unsigned depth;     /* open containers */
    /* Per open container: bit 0 set while no element was read yet, bit 1
     * set for an object. */
    unsigned char level[JSON_MAX_DEPTH];
};

/* Starts reading buf[0..len).  buf[len] must be '\0' (a sentinel that
 * ends every scanning loop).  A UTF-8 byte-order mark is skipped. */
void json_init(struct json_cursor *c, char *buf, size_t len,
               struct arena *arena, bool insitu);

/* Type of the next value (skipping whitespace), or JSON_INVALID with the
 * status set when the input ends or holds a byte no value starts with. */
enum json_type json_peek(struct json_cursor *c);

/* Consume a scalar of the named type.  0 on success; JSON_ETYPE /
 * JSON_ERANGE leave the value unread; other errors are sticky. */
int json_get_null(struct json_cursor *c);
int json_get_bool(struct json_cursor *c, bool *out);
int json_get_int64(struct json_cursor *c, int64_t *out);
int json_get_uint64(struct json_cursor *c, uint64_t *out);
/* *s is NUL-terminated and stays valid as long as buf and the arena. */
int json_get_string(struct json_cursor *c, const char **s, size_t *len);

/* As json_get_string, for a caller that compares or copies the string at
 * once: a string without escapes is handed out in place and is NOT
 * NUL-terminated (*len bytes at *s); one with escapes is decoded into the
 * arena as always.  Never writes into buf, whatever insitu says. */
int json_get_span(struct json_cursor *c, const char **s, size_t *len);

/* Consume '[' / '{'.  0, JSON_ETYPE, or a sticky error. */
int json_enter_array(struct json_cursor *c);
int json_enter_object(struct json_cursor *c);

/* In an array: 1 when a value follows (consume it), 0 when the closing ']'
 * was consumed, or a negative error. */
int json_next_element(struct json_cursor *c);

/* In an object: 1 when a member follows (its key is in *key, *keylen, and
 * its value must be consumed next), 0 when '}' was consumed, or a negative
 * error.  key may be NULL to skip the key without decoding it. */
int json_next_member(struct json_cursor *c, const char **key, size_t *keylen);

/* As json_next_member, with the key handed out as json_get_span hands out
 * a string (keylen must not be NULL), except that a key decoded from an
 * escape ends at its first NUL, as a C string would. */
int json_next_key(struct json_cursor *c, const char **key, size_t *keylen);

/* Consumes (and validates) the next value of any type. */
int json_skip(struct json_cursor *c);

/* After the top-level value: 0 when only whitespace remains. */
int json_finish(struct json_cursor *c);

/* Bytes consumed so far (where the next value starts after whitespace). */
size_t json_offset(const struct json_cursor *c);

/* 1-based line and byte column of offset in buf. */
void json_line_col(const char *buf, size_t offset, unsigned long *line,
                   unsigned long *col);

#endif
