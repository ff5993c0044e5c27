/* record_thread.h - the tracker's per-thread cache (record.c,
 * record_fast.h): its types and how a stack finds its slot.  The cache itself is a member of the
 * thread's hot TLS block (thread/thread_hot.h), named record_tc.
 */
#ifndef CUMEMTRACE_RECORD_THREAD_H
#define CUMEMTRACE_RECORD_THREAD_H

#include <stddef.h>
#include <stdint.h>

struct record_stack;
struct site;
struct live;
struct record_ring;

/* Stacks this thread allocated from, by hash: a two-way cache (16 sets of
 * 2 slots, 768 bytes of static TLS: little, should a host dlopen us) of
 * immutable stacks, and of the site the stack last allocated into.
 * Direct-mapped, two call sites in turn whose hashes shared a slot took
 * the slow path on every allocation (call sites taking turns); now a set holds both, and 3 of a few hot stacks
 * rarely share a set.  record_tc_slot finds a stack's slot. */
#define RECORD_TC_SETS 16
#define RECORD_TC_STACKS (2 * RECORD_TC_SETS)
struct record_stack_slot {
    uint64_t hash;
    struct record_stack *st; /* NULL: empty */
    struct site *site;       /* st's site for some (pool, kind), or NULL */
};
/* Frees park their entry here for this thread's next allocations; beyond
 * RECORD_TC_FREE_MAX half of the list goes back to the shared one in one
 * trip (the other half stays for the allocations to come).  512: a batch of
 * 256 allocations freed together cycles through the parked entries alone;
 * at most 16 KiB of entries parked a thread. */
#define RECORD_TC_FREE_MAX 512
struct record_thread_cache {
    struct record_stack_slot stacks[RECORD_TC_STACKS];
    struct live *free;
    uint32_t nfree;
    uint32_t tid; /* 0 until asked (record_current_tid), < 2^TID_BITS */
};

/* This thread's cache slot of the stack of hash h: the way of its set that
 * holds h, else way 0 (a miss: the caller checks the slot). */
static inline struct record_stack_slot *record_tc_slot(struct record_stack_slot *stacks,
                                                       uint64_t h)
{
    struct record_stack_slot *c = &stacks[(h % RECORD_TC_SETS) * 2];
    if (__builtin_expect(c->hash != h && c[1].hash == h, 0))
        c++;
    return c;
}

/* The slot for a stack of hash h that this thread's cache lacks: way 0 of
 * its set, whose stack moves to way 1 (the older one there goes). */
static inline struct record_stack_slot *record_tc_victim(struct record_stack_slot *stacks,
                                                         uint64_t h)
{
    struct record_stack_slot *c = &stacks[(h % RECORD_TC_SETS) * 2];
    if (c->st != NULL)
        c[1] = c[0];
    c->st = NULL;
    c->site = NULL;
    c->hash = 0;
    return c;
}

#endif
