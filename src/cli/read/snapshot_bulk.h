/* snapshot_bulk.h - events and stacks, streamed (snapshot_bulk.c). */
#ifndef CUMEMTRACE_CLI_SNAPSHOT_BULK_H
#define CUMEMTRACE_CLI_SNAPSHOT_BULK_H

#include "reader.h"

/* Sets the documented event column order, for files whose "columns" come
 * after "data" or are absent. */
void snapshot_bulk_init(struct reader *r);

/* Readers of the top-level "events", and of an element of "modules" and
 * "stacks" (obj: the snapshot).  0 or a CLI_E* code.  What they allocate in
 * r (tmp, key, mods, expand) the caller frees with the reader. */
int snapshot_bulk_events(struct reader *r, void *obj);
int snapshot_bulk_module(struct reader *r, void *obj, size_t i);
int snapshot_bulk_stack(struct reader *r, void *obj, size_t i);

#endif
