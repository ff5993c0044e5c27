/* oom.h - out-of-memory post-mortems and retry chains (oom.c); what is
 * known of them is in the ledger (oom_ledger.h). */
#ifndef CUMEMTRACE_OOM_H
#define CUMEMTRACE_OOM_H

#include <stdbool.h>
#include <stdint.h>

#include "record.h"
#include "thread_hot.h"

/* The calling thread's chain state, NULL until its first failure: while it
 * is NULL the hooks skip oom_on_success and oom_on_free (no chain can be
 * open). */
struct oom_info; /* oom_chain: a member of thread_hot (thread_hot.h) */

/* Called by the hooks; cheap unless the calling thread has an open chain. */
void oom_on_failure(unsigned slot, enum record_kind kind, int device,
                    uint64_t requested, bool by_limit,
                    struct record_stack *stack, int64_t now);
void oom_on_success(enum record_kind kind, int device, uint64_t requested,
                    int64_t now);
void oom_on_free(uint64_t bytes, uint32_t stack);

/* Before the exit snapshot: rewrites each post-mortem whose chain moved on
 * since its last write (a retry loop still running, a chain never closed),
 * and says in one line how many failures went unreported.  No CUDA calls. */
void oom_at_exit(int64_t now);
void oom_atfork_child(void);
/* The calling thread ends: its chain state is freed (call_state.c). */
void oom_thread_end(void);

#endif
