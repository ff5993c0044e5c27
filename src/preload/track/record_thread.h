/* record_thread.h - the tracker's per-thread cache (record.c,
 * record_fast.h): types only.  The cache itself is a member of the
 * thread's hot TLS block (thread/thread_hot.h), named record_tc.
 */
#ifndef CUMEMTRACE_RECORD_THREAD_H
#define CUMEMTRACE_RECORD_THREAD_H

#include <stdint.h>

struct record_stack;
struct site;
struct live;
struct record_ring;

/* Stacks this thread allocated from, by hash: a direct-mapped cache (16
 * slots, 384 bytes of static TLS: little, should a host dlopen us) of
 * immutable stacks, and of the site the stack last allocated into. */
#define RECORD_TC_STACKS 16
struct record_stack_slot {
    uint64_t hash;
    struct record_stack *st; /* NULL: empty */
    struct site *site;       /* st's site for some (pool, kind), or NULL */
};
/* Frees park their entry here for this thread's next allocations; beyond
 * RECORD_TC_FREE_MAX the list goes back to the shared one in one trip. */
#define RECORD_TC_FREE_MAX 64
struct record_thread_cache {
    struct record_stack_slot stacks[RECORD_TC_STACKS];
    struct live *free;
    uint32_t nfree;
    uint32_t tid; /* 0 until asked (record_current_tid), < 2^TID_BITS */
    /* this thread's ring of events (record_rings.c), NULL until the rings
     * are on and it records by them */
    struct record_ring *ring;
};

#endif
