/* export.h - the writers of `cumemtrace export` (export.c). */
#ifndef CUMEMTRACE_CLI_EXPORT_H
#define CUMEMTRACE_CLI_EXPORT_H

#include <stdio.h>

#include "errors.h"
#include "snapshot.h"

/* speedscope's file format (its src/lib/file-format-spec.ts): shared frames
 * and one "sampled" profile in bytes per device and moment - PyTorch's
 * tensor groups where the file has them, unless --segments (the driver's
 * groups).  -1 when out of memory. */
int export_speedscope(FILE *f, struct snapshot *s);

/* PyTorch's memory-snapshot pickle (torch.cuda.memory._snapshot()'s
 * dictionary) for pytorch.org/memory_viz; see export_memviz.c for what is
 * synthetic.  Returns 0, or a CLI_E* code with err set (a thinned log
 * cannot be replayed). */
int export_memviz(FILE *f, struct snapshot *s, struct cli_error *err);

/* A gzipped pprof profile (profile.proto) with sample types inuse_space (at
 * the peak), inuse_space_exit, alloc_space and alloc_objects - the inuse
 * ones PyTorch's tensor groups where the file has them, unless --segments;
 * 0 or a CLI_E* code with err set. */
int export_pprof(FILE *f, struct snapshot *s, struct cli_error *err);

#endif
