/* esc.h - recorded strings made harmless for a terminal (the CLI's text
 * views and the library's messages, log.c).
 *
 * Executable names, command lines, file names and symbols come from the
 * traced process or from whoever wrote the file: printed raw, an ESC, CR,
 * BEL or a bidirectional override in them would drive the user's terminal
 * (clear it, rewrite a line, reorder text).  Text views print recorded
 * strings through esc_text (usually via snapshot_display); JSON outputs
 * escape through json_out instead.
 *
 * Escaped, each byte as \xNN (docs/cli.md, "Strings in text output"): the
 * C0 controls (U+0000-U+001F, newline and tab included: a recorded string
 * never spans lines), DEL, the C1 controls U+0080-U+009F, the bidirectional
 * formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069), the line and paragraph separators U+2028, U+2029, and
 * every byte that is not part of well-formed UTF-8.
 */
#ifndef CUMEMTRACE_CLI_ESC_H
#define CUMEMTRACE_CLI_ESC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True for a code point esc_text escapes (the list above). */
bool esc_unsafe(uint32_t cp);

/* Room esc_text needs for n input bytes: 4 per byte and the NUL. */
#define ESC_ROOM(n) (4 * (n) + 1)

/* True when s prints as itself (nothing to escape); s non-NULL. */
bool esc_clean(const char *s);

/* Writes s into out (at least ESC_ROOM(strlen(s)) bytes) with each unsafe
 * byte as \xNN, NUL-terminated; returns the length written. */
size_t esc_text(const char *s, char *out);

#endif
