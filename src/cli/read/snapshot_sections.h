/* snapshot_sections.h - reading the document's sections (snapshot_sections.c). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_SECTIONS_H
#define CUMEMTRACE_CLI_SNAPSHOT_SECTIONS_H

#include "reader.h"

/* Empties *s and sets what each missing field reads as (unknown, 0, ...). */
void snapshot_sections_init(struct snapshot *s, struct snapctx *ctx, const char *name,
                            size_t len);

/* Reads the top-level object at the cursor into r->s, noting "format" and
 * "version" in r for snapshot_read.c to judge.  0 or a CLI_E* code. */
int snapshot_sections_read(struct reader *r);

#endif
