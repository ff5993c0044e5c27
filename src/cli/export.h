/* export.h - the writers of `cumemtrace export` (export.c). */
#ifndef CUMEMTRACE_CLI_EXPORT_H
#define CUMEMTRACE_CLI_EXPORT_H

#include <stdio.h>

#include "snapshot.h"

/* speedscope's file format (its src/lib/file-format-spec.ts): shared frames
 * and one "sampled" profile in bytes per device and moment.  -1 when out of
 * memory. */
int export_speedscope(FILE *f, struct snapshot *s);

#endif
