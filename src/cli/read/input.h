/* input.h - the bytes of one input file, read within the file's bounds.
 *
 * Every file the CLI reads comes through here.  Only regular files are
 * inputs: a FIFO would block the command forever and a device (a symlink
 * to /dev/zero) feed it without end, so both are refused before any read,
 * with the kind named.  A file is read up to its size and no further, and
 * only as far as its data goes: a sparse file's hole is not read (our
 * writers never leave holes, and a large one read as zeros costs its size).
 */
#ifndef CUMEMTRACE_CLI_INPUT_H
#define CUMEMTRACE_CLI_INPUT_H

#include <stddef.h>

#include "errors.h"

struct input {
    char *buf;     /* len bytes, then a '\0' */
    size_t len;    /* bytes read: the file's size, or where its first hole starts */
    size_t maplen; /* > 0: buf is a private mapping of this many bytes; else malloc'd */
};

/* Reads `path` (a symlink is followed to what it names) into in.  0, or a
 * CLI_E* code with err set to one line: "cannot read <what> '<path>': ...".
 * The caller releases in with input_free. */
int input_load(const char *path, const char *what, struct input *in,
               struct cli_error *err);
void input_free(struct input *in);

#endif
