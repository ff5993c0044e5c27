/* outfile.h - every file the CLI writes (-o OUT of html, export, recover,
 * timeline --chrome, diff --html), written as the library writes its
 * snapshots: into a temporary file beside OUT, then renamed onto it.
 *
 * So OUT is either its old self or complete: a full disk, an error or a
 * kill half-way leaves no partial file (the temporary is removed).  An
 * existing OUT must be a regular file: a symbolic link is refused (it was
 * followed, overwriting whatever it named), and so is a FIFO (it blocked
 * the command), a device node (`recover` deleted it after the write
 * failed), a directory or a socket - all before anything is written.
 */
#ifndef CUMEMTRACE_CLI_OUTFILE_H
#define CUMEMTRACE_CLI_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "errors.h"

struct outfile {
    FILE *f;           /* where to write: stdout for "-" */
    const char *path;  /* OUT as given */
    char tmp[4200];    /* the temporary beside it; "" for stdout */
    bool replace;      /* an existing regular OUT may be replaced */
};

/* Opens OUT ("-": stdout) for `cmd` ("html", "recover"...).  replace: an
 * existing regular file is replaced at commit (else it is an error, now
 * and at commit).  0, or CLI_EWRITE with err set to one line. */
int outfile_open(struct outfile *o, const char *cmd, const char *path, bool replace,
                 struct cli_error *err);
/* Flushes, closes and renames the temporary onto OUT (stdout: flushes).
 * 0, or CLI_EWRITE with err set (the temporary is removed). */
int outfile_commit(struct outfile *o, const char *cmd, struct cli_error *err);
/* Gives up: closes and removes the temporary; OUT is as it was. */
void outfile_abort(struct outfile *o);

#endif
