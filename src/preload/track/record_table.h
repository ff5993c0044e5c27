/* record_table.h - the tracker's address tables (live allocations, VMM
 * handles): open addressing with linear probing, keyed by address, each slot
 * holding the key beside the entry so a probe compares without touching the
 * entry.  Private to the record_*.c files; the caller holds record_lock.
 *
 * Why not uthash: its insert, find and delete cost far more instructions
 * and 56 bytes of handle per entry; a probe here is a few instructions and
 * a slot is 16 bytes.  The load stays at most 1/2, so a
 * lookup probes ~1.5 slots on average.  Deletion shifts the following
 * entries back (no tombstones), so lookups never slow down with churn.
 * Slots live in pages of the tracker's own (record_pages.h).
 */
#ifndef CUMEMTRACE_RECORD_TABLE_H
#define CUMEMTRACE_RECORD_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "record_pages.h"

struct live;

struct table_slot {
    uintptr_t key;
    struct live *e; /* NULL: empty slot */
};

struct addr_table {
    struct table_slot *slots;
    uint32_t mask;  /* slots - 1; slots is a power of two */
    uint32_t count; /* occupied slots */
};

/* Fibonacci hashing: the address times 2^64 over the golden ratio; the
 * byte swap brings the product's top bytes, whose bits depend on all the
 * address bits below them, down to where the mask keeps them: three
 * instructions, no per-table shift.  Allocations are strided (4 KiB, 2 MiB,
 * 1 TiB arenas apart) and of a few sizes in turn; on every free order of
 * tests/bench/bench_alloc this costs fewer instructions a pair than both
 * the earlier fold of the high bits into the low ones with the product's
 * bits 32 and up (six instructions) and the top bits taken by a shift
 * (longer probes with varied sizes). */
static inline uint32_t table_home(const struct addr_table *t, uintptr_t key)
{
    return (uint32_t)__builtin_bswap64((uint64_t)key * 0x9E3779B97F4A7C15ULL) & t->mask;
}

/* The slot holding `key`, or NULL. */
static inline struct table_slot *table_find(const struct addr_table *t,
                                            uintptr_t key)
{
    if (t->slots == NULL)
        return NULL;
    for (uint32_t i = table_home(t, key);; i = (i + 1) & t->mask) {
        struct table_slot *s = &t->slots[i];
        if (s->e == NULL)
            return NULL;
        if (s->key == key)
            return s;
    }
}

/* Doubles the slots (first: 1024); false when memory is exhausted.  Out
 * of line: rare, and it would crowd the allocation path's registers. */
static __attribute__((noinline, cold)) bool table_grow(struct addr_table *t)
{
    uint32_t n = t->slots ? (t->mask + 1) * 2 : 1024;
    if (n == 0)
        return false;
    struct table_slot *slots = record_pages((size_t)n * sizeof *slots);
    if (slots == NULL)
        return false;
    struct addr_table grown = {slots, n - 1, t->count};
    for (uint32_t i = 0; t->slots != NULL && i <= t->mask; i++) {
        if (t->slots[i].e == NULL)
            continue;
        uint32_t j = table_home(&grown, t->slots[i].key);
        while (slots[j].e != NULL)
            j = (j + 1) & grown.mask;
        slots[j] = t->slots[i];
    }
    if (t->slots != NULL)
        record_pages_free(t->slots, ((size_t)t->mask + 1) * sizeof *t->slots);
    *t = grown;
    return true;
}

/* The slot holding `key`, or else the empty slot it would take (e == NULL:
 * the caller fills key and e and counts it); NULL when the table is full
 * and cannot grow.  One probe sequence for a lookup and an insert. */
static inline __attribute__((always_inline)) struct table_slot *
table_slot(struct addr_table *t, uintptr_t key)
{
    /* past half full, or no slots yet (mask 0, count 0): one compare */
    if (__builtin_expect(t->count >= (t->mask + 1) / 2, 0)) {
        /* Without memory keep going up to 7/8 full: slower, never wrong. */
        if (!table_grow(t) && (t->slots == NULL || (t->count + 1) * 8 > (t->mask + 1) * 7))
            return NULL;
    }
    for (uint32_t i = table_home(t, key);; i = (i + 1) & t->mask) {
        struct table_slot *s = &t->slots[i];
        if (s->e == NULL || s->key == key)
            return s;
    }
}

/* Adds `e` under `key`, which must not be there.  False when the table is
 * full and cannot grow (the caller forgets the entry). */
static inline bool table_add(struct addr_table *t, uintptr_t key, struct live *e)
{
    if (t->slots == NULL || (t->count + 1) * 2 > t->mask + 1) {
        /* Without memory keep going up to 7/8 full: slower, never wrong. */
        if (!table_grow(t) && (t->slots == NULL || (t->count + 1) * 8 > (t->mask + 1) * 7))
            return false;
    }
    uint32_t i = table_home(t, key);
    while (t->slots[i].e != NULL)
        i = (i + 1) & t->mask;
    t->slots[i].key = key;
    t->slots[i].e = e;
    t->count++;
    return true;
}

/* Empties slot `s` (from table_find), shifting back the entries after it
 * that probed past it, so that no lookup needs a tombstone. */
static inline void table_remove(struct addr_table *t, struct table_slot *s)
{
    uint32_t hole = (uint32_t)(s - t->slots);
    for (uint32_t j = (hole + 1) & t->mask;; j = (j + 1) & t->mask) {
        struct table_slot *n = &t->slots[j];
        if (n->e == NULL)
            break;
        uint32_t home = table_home(t, n->key);
        /* n may fill the hole when its home is not cyclically in (hole, j] */
        if (((j - home) & t->mask) >= ((j - hole) & t->mask)) {
            t->slots[hole] = *n;
            hole = j;
        }
    }
    t->slots[hole].e = NULL;
    t->count--;
}

/* Frees the slots (fork child). */
static inline void table_clear(struct addr_table *t)
{
    if (t->slots != NULL)
        record_pages_free(t->slots, ((size_t)t->mask + 1) * sizeof *t->slots);
    t->slots = NULL;
    t->mask = t->count = 0;
}

/* Slot count, for iteration: slots[0..table_size) with e != NULL.  A loop
 * that removes the slot it visits must look at the same index again (an
 * entry from further on may have shifted into it). */
static inline uint32_t table_size(const struct addr_table *t)
{
    return t->slots ? t->mask + 1 : 0;
}

#endif
