/* thread_hot.h - the per-thread state a traced allocation or free touches,
 * in one initial-exec TLS block.
 *
 * A shared library reaches an initial-exec TLS variable through its offset
 * from the thread pointer, loaded from the GOT: each distinct variable a
 * function touches costs it a load and a register; the members of one
 * block share both.  The wrappers' fast path (interpose/hooks_fast.h)
 * touched four such variables in a cudaMalloc and three in a cudaFree.
 * Each member belongs to one concern, which alone writes it and names it
 * by the macro below:
 *   hooks_thread   interpose/call_state.c  the call's state (hooks_thread.h)
 *   record_tc      track/record.c          the tracker's thread cache
 *                                          (record_thread.h)
 *   phase_current  phases/phases.c         the thread's innermost phase
 *   oom_chain      oom/oom.c               its OOM retry chain, NULL until
 *                                          its first failure
 * This unit only holds them (thread_hot.c defines the block): it calls
 * nothing and includes types only, so it is below all four.
 */
#ifndef CUMEMTRACE_THREAD_HOT_H
#define CUMEMTRACE_THREAD_HOT_H

#include <stdint.h>

#include "hooks_thread.h"
#include "record_thread.h"

struct oom_info;

struct thread_hot {
    struct hooks_thread_state hooks; /* first: hooks_word reads its first 8 bytes */
    struct oom_info *oom;
    uint32_t phase;
    struct record_thread_cache tc;
};
extern __thread struct thread_hot thread_hot __attribute__((tls_model("initial-exec")));

#define hooks_thread (thread_hot.hooks)
#define record_tc (thread_hot.tc)
#define phase_current (thread_hot.phase)
#define oom_chain (thread_hot.oom)

#endif
