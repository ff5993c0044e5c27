/* oom_text.h - what failed and why, in the words every view of a
 * post-mortem prints, shared by oom_causes.c's rows and the views.
 *
 * The request named is the user's: the caching allocator's when it spoke
 * (PyTorch asked for 64 MiB), not the driver call that failed under it (a
 * 20 MiB cuMemCreate step of expandable segments).
 *
 * A driver refusal with more free than requested is not explained by
 * fragmentation: a GPU's MMU maps scattered physical pages, so cudaMalloc
 * needs no contiguous memory.  What can explain it, from the run's figures,
 * is oom_text_refusal's answer; fragmentation claims rest on the caching
 * allocator's segments only (cause allocator_fragmentation).
 */
#ifndef CUMEMTRACE_CLI_OOM_TEXT_H
#define CUMEMTRACE_CLI_OOM_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* What a new allocation's page tables and the driver's own reserve take out
 * of what cuMemGetInfo reports free: tens of MiB on current GPUs, so a
 * request within this much of "free" can be refused. */
#define OOM_TEXT_DRIVER_MARGIN ((uint64_t)64 << 20)
/* Memory outside this process's allocations that its own CUDA context,
 * cuBLAS/cuDNN workspaces and NCCL buffers explain (~0.3-1 GiB on current
 * GPUs; the library's classification uses the same allowance). */
#define OOM_TEXT_CONTEXT_BYTES ((uint64_t)1 << 30)

/* Why the driver refused a request while reporting at least that much
 * free (cause "refused_while_free"). */
enum oom_refusal {
    REFUSAL_ROUNDING,     /* rounded up to the page, it needs more than free */
    REFUSAL_MARGIN,       /* free exceeds it by less than OOM_TEXT_DRIVER_MARGIN */
    REFUSAL_OTHERS,       /* more than a context is held outside this process */
    REFUSAL_UNEXPLAINED,  /* nothing measured explains it */
};

/* The user's request in bytes: the caching allocator's when it spoke and
 * said, else the failing call's. */
uint64_t oom_text_request(const struct snap_oom *o);

/* The allocator's name as prose: "PyTorch" for ours, else "the caching
 * allocator". */
const char *oom_text_allocator(const struct snap_allocator *a);

/* The device's page size (its granularity) at the failure, SNAP_UNKNOWN
 * when not recorded. */
uint64_t oom_text_granularity(const struct snapshot *s);

/* The explanation of a refusal with free >= request; *figure gets what the
 * sentence quotes (the rounded request, the margin, the untracked bytes). */
enum oom_refusal oom_text_refusal(const struct snapshot *s, uint64_t *figure);

/* The autograd node whose request failed (oom.allocator.origin) as one
 * sentence in buf: "MulBackward0 on autograd's backward thread, the
 * backward of model.py:14:forward", or why its forward line is not known;
 * "" when the failing request was not made in backward.  Returns buf. */
const char *oom_text_origin(const struct snapshot *s, char *buf, size_t n);

#endif
