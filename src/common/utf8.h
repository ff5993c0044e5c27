/* utf8.h - well-formed UTF-8 (RFC 3629, Unicode 15 table 3-7).
 * Stateless; the snapshot writer uses it to keep every snapshot valid UTF-8
 * whatever bytes argv or a file name holds, the CLI to decide what it may
 * print to a terminal.
 */
#ifndef CUMEMTRACE_UTF8_H
#define CUMEMTRACE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The code point written in place of each byte that does not begin a
 * well-formed sequence. */
#define UTF8_REPLACEMENT 0xFFFDu

/* Decodes the sequence at s (n >= 1 bytes available).  Returns its length,
 * 1 to 4, and stores the code point in *cp; or returns 0 when the bytes
 * there are not one well-formed sequence: a lone continuation byte, a
 * sequence cut short, an overlong form (C0, C1, E0 80..9F, F0 80..8F), a
 * surrogate (ED A0..BF) or a code point above U+10FFFF (F4 90.., F5..FF).
 * A NUL byte inside a sequence ends it (so a NUL-terminated string may be
 * passed with n = its strlen).  ASCII decodes as itself, length 1. */
size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

#endif
