/* record_stacks.c - the tracker's stack table and the call sites hanging
 * off each stack (one per pool, kind and phase): found or created under the lock
 * when a thread's own cache (record.c) misses, so once a program's stacks
 * are known nothing here runs on the allocation path.  Stacks are
 * immutable once published: dumps and the per-thread caches read their
 * frames without the lock.
 */
#include "record_impl.h"

#include <stdlib.h>

struct site **record_site_table;
uint32_t record_nsites;
static uint32_t sites_cap;
static struct stack_node *stack_table;
struct stack_node **record_stacks_by_id;
size_t record_nstacks;
static size_t stacks_cap;

/* Room in the id index for one more stack: false when memory is exhausted. */
static bool stacks_room_locked(void)
{
    RECORD_ASSERT_LOCKED();
    if (record_nstacks < stacks_cap)
        return true;
    size_t cap = stacks_cap ? stacks_cap * 2 : 1024;
    struct stack_node **p = realloc(record_stacks_by_id, cap * sizeof *p);
    if (p == NULL)
        return false;
    record_stacks_by_id = p;
    stacks_cap = cap;
    return true;
}

/* Gives n the next id (after stacks_room_locked said there is room). */
static void stack_publish_locked(struct stack_node *n)
{
    RECORD_ASSERT_LOCKED();
    n->s.id = (uint32_t)record_nstacks + 1;
    record_stacks_by_id[record_nstacks++] = n;
    record_totals.stacks = record_nstacks;
}

/* Finds or creates the stack; the caller holds the lock.  NULL only when
 * memory is exhausted. */
struct record_stack *record_intern_locked(uint64_t h, unsigned entry,
                                          void *const *frames, unsigned depth)
{
    RECORD_ASSERT_LOCKED();
    struct stack_node *n, *head;
    HASH_FIND(hh, stack_table, &h, sizeof h, head);
    for (n = head; n != NULL; n = n->collide)
        if (record_stack_equal(&n->s, entry, frames, depth))
            return &n->s;

    if (!stacks_room_locked())
        return NULL;
    n = malloc(sizeof *n + depth * sizeof(void *));
    if (n == NULL)
        return NULL;
    memset(n, 0, sizeof *n);
    n->hash = h;
    n->s.depth = (uint16_t)depth;
    n->s.entry = (uint16_t)entry;
    memcpy(n->s.frames, frames, depth * sizeof(void *));
    if (head != NULL) {
        n->collide = head->collide;
        head->collide = n;
    } else {
        HASH_ADD(hh, stack_table, hash, sizeof n->hash, n);
        if (record_nomem) {
            record_nomem = false;
            free(n);
            return NULL;
        }
    }
    stack_publish_locked(n);
    return &n->s;
}

static struct stack_node *node_of(struct record_stack *s)
{
    return (struct stack_node *)((char *)s - offsetof(struct stack_node, s));
}

/* The shared stack of allocations whose stack could not be stored. */
static struct stack_node unknown;

static struct record_stack *unknown_stack_locked(void)
{
    RECORD_ASSERT_LOCKED();
    if (unknown.s.id == 0) {
        if (!stacks_room_locked())
            return NULL;
        unknown.s.entry = 0xffff;
        stack_publish_locked(&unknown);
    }
    return &unknown.s;
}

/* Tables the site table outgrew.  A free reads its entry's site through
 * the table outside the lock (record_token_stack): a table it may still
 * hold is never freed while the process lives (doubling from 1024, the old
 * ones add up to less than the current one; at most 21 growths). */
static struct site **outgrown[32];
static unsigned noutgrown;

static bool site_table_grow_locked(void)
{
    RECORD_ASSERT_LOCKED();
    uint32_t cap = sites_cap ? sites_cap * 2 : 1024;
    if (cap < sites_cap || cap >= HANDLE_BIT || noutgrown == 32)
        return false;
    struct site **t = malloc(cap * sizeof *t);
    if (t == NULL)
        return false;
    if (record_nsites > 0)
        memcpy(t, record_site_table, record_nsites * sizeof *t);
    if (record_site_table != NULL)
        outgrown[noutgrown++] = record_site_table;
    /* release: a reader that sees the new table sees what was copied */
    __atomic_store_n(&record_site_table, t, __ATOMIC_RELEASE);
    sites_cap = cap;
    return true;
}

/* Sites of a phase other than 0, by (stack, pool, kind, phase): open
 * addressing, at most half full.  A stack may allocate in thousands of
 * phases, so its list is not searched for them. */
static struct site **phased_slots;
static uint32_t phased_mask, phased_count;

static inline uint32_t phased_home(const struct record_stack *stack, uint32_t pool,
                                   unsigned kind, uint32_t phase)
{
    uint64_t x = (uint64_t)(uintptr_t)stack ^ ((uint64_t)phase << 32 | pool << 8 | kind);
    x *= 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(x >> 32) & phased_mask;
}

static struct site **phased_find_locked(const struct record_stack *stack, uint32_t pool,
                                        unsigned kind, uint32_t phase)
{
    RECORD_ASSERT_LOCKED();
    for (uint32_t i = phased_home(stack, pool, kind, phase);; i = (i + 1) & phased_mask) {
        struct site *s = phased_slots[i];
        if (s == NULL || (s->s.stack == stack && s->s.pool == pool && s->s.kind == kind &&
                          s->s.phase == phase))
            return &phased_slots[i];
    }
}

static bool phased_grow_locked(void)
{
    RECORD_ASSERT_LOCKED();
    uint32_t n = phased_slots ? (phased_mask + 1) * 2 : 1024;
    struct site **slots = calloc(n, sizeof *slots);
    if (slots == NULL)
        return false;
    struct site **old = phased_slots;
    uint32_t old_n = old ? phased_mask + 1 : 0;
    phased_slots = slots;
    phased_mask = n - 1;
    for (uint32_t i = 0; i < old_n; i++)
        if (old[i] != NULL)
            *phased_find_locked(old[i]->s.stack, old[i]->s.pool, old[i]->s.kind,
                                old[i]->s.phase) = old[i];
    free(old);
    return true;
}

static struct site *site_new_locked(struct record_stack *stack, uint32_t pool,
                                    enum record_kind kind, uint32_t phase)
{
    RECORD_ASSERT_LOCKED();
    if (record_nsites == sites_cap && !site_table_grow_locked())
        return NULL;
    struct site *s = aligned_alloc(_Alignof(struct site), sizeof *s);
    if (s == NULL)
        return NULL;
    memset(s, 0, sizeof *s);
    s->index = record_nsites;
    record_site_table[record_nsites++] = s;
    s->s.stack = stack;
    s->s.pool = pool;
    s->s.kind = (uint8_t)kind;
    s->s.phase = phase;
    s->match = site_match(pool, kind, phase);
    s->pool = &record_pools[pool];
    /* every event is a site's: a pool with a site has had one, or is about
     * to (so the events need not set it) */
    s->pool->active = true;
    s->kind_stats = &record_pools[pool].kinds[kind];
    s->event_tag = record_event_tag(stack->id,
                                    pool == RECORD_HOST_POOL ? -1 : (int16_t)pool,
                                    (uint8_t)kind);
    return s;
}

struct site *record_site_get_locked(struct record_stack *stack, uint32_t pool,
                                    enum record_kind kind, uint32_t phase)
{
    RECORD_ASSERT_LOCKED();
    if (stack == NULL && (stack = unknown_stack_locked()) == NULL)
        return NULL;
    struct stack_node *n = node_of(stack);
    if (phase == 0) {
        for (struct site *s = n->sites; s != NULL; s = s->next)
            if (s->s.pool == pool && s->s.kind == kind)
                return s;
        struct site *s = site_new_locked(stack, pool, kind, 0);
        if (s != NULL) {
            s->next = n->sites;
            n->sites = s;
        }
        return s;
    }
    if ((phased_count + 1) * 2 > (phased_slots ? phased_mask + 1 : 0) && !phased_grow_locked())
        return NULL;
    struct site **slot = phased_find_locked(stack, pool, kind, phase);
    if (*slot != NULL)
        return *slot;
    struct site *s = site_new_locked(stack, pool, kind, phase);
    if (s != NULL) {
        *slot = s;
        phased_count++;
        s->next = n->phased;
        n->phased = s;
    }
    return s;
}

void record_stacks_reset_locked(void)
{
    RECORD_ASSERT_LOCKED();
    HASH_CLEAR(hh, stack_table);
    for (size_t i = 0; i < record_nstacks; i++) {
        struct stack_node *n = record_stacks_by_id[i];
        while (n->sites != NULL) {
            struct site *next = n->sites->next;
            free(n->sites);
            n->sites = next;
        }
        while (n->phased != NULL) {
            struct site *next = n->phased->next;
            free(n->phased);
            n->phased = next;
        }
        if (n != &unknown)
            free(n);
    }
    unknown.s.id = 0;
    unknown.sites = unknown.phased = NULL;
    free(phased_slots);
    phased_slots = NULL;
    phased_mask = phased_count = 0;
    free(record_site_table);
    record_site_table = NULL;
    while (noutgrown > 0) /* the child has no readers of them */
        free(outgrown[--noutgrown]);
    record_nsites = sites_cap = 0;
    free(record_stacks_by_id);
    record_stacks_by_id = NULL;
    record_nstacks = stacks_cap = 0;
}
