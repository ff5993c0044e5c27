/* serialise_stacks.h - the "modules" and "stacks" sections of the
 * document, symbolised (serialise_stacks.c). */
#ifndef CUMEMTRACE_SERIALISE_STACKS_H
#define CUMEMTRACE_SERIALISE_STACKS_H

#include <stdbool.h>

#include "snapshot_json.h"
#include "record.h"

/* Writes "modules":[...],\n"stacks":[...]\n for the stacks of v.  keep:
 * a stream checkpoint, whose symbols are kept for the next one. */
void serialise_stacks(struct snapshot_json *w, const struct record_view *v, bool keep);

#endif
