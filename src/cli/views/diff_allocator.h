/* diff_allocator.h - `cumemtrace diff`'s caching-allocator section: the two
 * runs' PyTorch figures side by side. */
#ifndef CUMEMTRACE_CLI_DIFF_ALLOCATOR_H
#define CUMEMTRACE_CLI_DIFF_ALLOCATOR_H

#include <stdio.h>

#include "snapshot.h"

/* Prints the section for base -> new: each side's figures at its OOM (a
 * post-mortem) or its latest state (at exit); nothing when neither has any. */
void diff_allocator_print(FILE *f, struct snapctx *ctx, const struct snapshot *base,
                          const struct snapshot *new);

#endif
