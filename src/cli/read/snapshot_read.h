/* snapshot_read.h - load a snapshot file into the model of snapshot.h. */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_READ_H
#define CUMEMTRACE_CLI_SNAPSHOT_READ_H

#include <stddef.h>

#include "errors.h"
#include "snapshot.h"

/* Reads and validates the snapshot at path into *out (interning into ctx).
 * Returns 0, or a CLI_E* code with err holding one line that names the file
 * and the cause ("cannot read snapshot 'a.json': truncated after 1024
 * bytes"); *out is then empty.  Release with snapshot_free(). */
int snapshot_read_file(struct snapctx *ctx, const char *path,
                       struct snapshot *out, struct cli_error *err);

/* As snapshot_read_file for a document in memory: buf[len] must be '\0'
 * (buf is not modified).  name is used in messages and kept as out->file
 * (it must outlive *out). */
int snapshot_read_mem(struct snapctx *ctx, const char *name, char *buf,
                      size_t len, struct snapshot *out, struct cli_error *err);

#endif
