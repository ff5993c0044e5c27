/* oom_causes.h - each out-of-memory cause's words and traits as one row:
 * the `cause:` line (oom_causes_line), what to do (advice), the sentence in
 * the caching allocator's terms (oom_causes_allocator) and the facts
 * the views branch on.  A new cause is a row in oom_causes.c (the build
 * makes format.h's FORMAT_CAUSES from the rows) and the code that decides
 * it; the dispatchers read the row and name no cause.
 */
#ifndef CUMEMTRACE_CLI_OOM_CAUSES_H
#define CUMEMTRACE_CLI_OOM_CAUSES_H

#include <stdbool.h>
#include <stddef.h>

#include "advice_line.h"
#include "snapshot.h"

struct oom_cause_row {
    /* The cause, one clause, into buf: "exhausted - short by ...". */
    void (*line)(const struct snapshot *s, char *buf, size_t n);
    /* What to do about it (advice_add lines); NULL: nothing of its own. */
    void (*advice)(struct snapshot *s, struct advice *out, int *n);
    /* One sentence of cause and numbers in the caching allocator's terms,
     * into buf; called only when the allocator spoke. */
    void (*allocator)(const struct snap_oom *o, char *buf, size_t n);
    /* Refused by the caching allocator itself, no CUDA call made: the
     * allocator, not an entry point, is named as what failed. */
    bool by_allocator;
    /* Memory held outside this process can be the lever (the "untracked"
     * advice); not when a cap or a refusal with memory free is the cause. */
    bool outside_advice;
    /* The address layout of this process's allocations is shown: only a
     * driver's refusal with memory free is about where memory lies. */
    bool shows_layout;
};

/* The row of cause c (an enum oom_cause); a cause this version does not
 * know gets CAUSE_UNKNOWN's, which prints the name the file gave. */
const struct oom_cause_row *oom_cause_row(int c);

/* "cudaMalloc of 256 MiB of device memory failed on device 0", or "PyTorch
 * refused 256 MiB ... without a CUDA call"; returns buf. */
const char *oom_causes_failure(const struct snapshot *s, char *buf, size_t n);

/* The cause, one clause: "exhausted - short by 16.0 MiB (request 64.0 MiB,
 * free 4.00 MiB)"; returns buf. */
const char *oom_causes_line(const struct snapshot *s, char *buf, size_t n);

/* One plain sentence of cause and numbers, into buf ("" when the
 * allocator did not speak).  Returns buf. */
const char *oom_causes_allocator(const struct snap_oom *o, char *buf, size_t n);

#endif
