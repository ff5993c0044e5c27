/* record_cost.c - the tracker's added cost per allocation at two sizes of
 * the live table, for tests/e2e/test_record_cost.py, which runs it under
 * callgrind and compares the instructions of pairs_at_50k and
 * pairs_at_400k: a hash table that keeps its load factor costs the same at
 * both; one that stops growing costs eight times more at 400 k.
 *
 * The live allocations are 2 KiB apart, like a caching allocator's small
 * blocks: the address stride the tracker's hash must spread.
 *
 * `record_cost logged` times the hooks' own path instead, for
 * test_record_cost.py's budget: record_alloc_at (the stack found in the
 * thread's cache), the event log on, the clock read by the caller;
 * `record_cost thinned` the same with the log full and thinning. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "record.h"

#define BASE ((uintptr_t)0x7f0000000000ULL)
#define STRIDE 2048
#define PAIRS 20000

static struct record_stack *stack;
static size_t live;

static void alloc_at(uintptr_t addr)
{
    struct record_alloc a = {.addr = addr, .size = STRIDE, .requested = STRIDE,
                             .kind = KIND_DEVICE, .device = 0};
    record_alloc(&a, stack, 0);
}

static void fill(size_t n)
{
    for (; live < n; live++)
        alloc_at(BASE + live * STRIDE);
}

/* PAIRS allocations, each freed at once: the live count stays where it is. */
static void pairs(void)
{
    for (size_t i = 0; i < PAIRS; i++) {
        uintptr_t addr = BASE + (live + i) * STRIDE;
        alloc_at(addr);
        record_free_finish(record_free_take(addr, KIND_COUNT, 0), true, 0);
    }
}

/* Separate, never inlined, and not identical (so never folded into one),
 * so that callgrind can count each. */
__attribute__((noinline)) void pairs_at_50k(void);
__attribute__((noinline)) void pairs_at_400k(void);
void pairs_at_50k(void) { pairs(); }
void pairs_at_400k(void) { pairs(); __asm__ volatile("" ::: "memory"); }

/* The hooks' path: PAIRS allocations at a cached stack, each freed at
 * once, every event logged. */
static int64_t t_ns = 1; /* a nanosecond an event, on from run to run */

__attribute__((noinline)) void pairs_logged(void);
void pairs_logged(void)
{
    void *frames[2] = {(void *)0x1000, (void *)0x2000};
    for (size_t i = 0; i < PAIRS; i++) {
        uintptr_t addr = BASE + (live + i) * STRIDE;
        struct record_alloc a = {.addr = addr, .size = STRIDE, .requested = STRIDE,
                                 .kind = KIND_DEVICE, .device = 0};
        record_alloc_at(&a, 1, frames, 2, t_ns + (int64_t)i * 2);
        record_free_finish(record_free_take(addr, KIND_COUNT, t_ns + (int64_t)i * 2 + 1),
                           true, 0);
    }
    t_ns += 2 * PAIRS;
}

/* The same once the log is full and thinning (a long run's steady state):
 * a small bound, thinned many times over. */
__attribute__((noinline)) void pairs_thinned(void);
void pairs_thinned(void) { pairs_logged(); __asm__ volatile("" ::: "memory"); }

static int logged(bool thinned)
{
    void *frames[2] = {(void *)0x1000, (void *)0x2000};
    /* every event kept, or thinned from the first pairs on */
    record_init(thinned ? 4096 : 4 * PAIRS, NULL);
    for (; live < 1000; live++) {
        struct record_alloc a = {.addr = BASE + live * STRIDE, .size = STRIDE,
                                 .requested = STRIDE, .kind = KIND_DEVICE, .device = 0};
        record_alloc_at(&a, 1, frames, 2, 0);
    }
    if (thinned) {
        pairs_logged(); /* past the first thinning, which searches */
        pairs_thinned();
    } else {
        pairs_logged();
    }
    struct record_view v;
    uint64_t want = 1000 + (thinned ? 4 : 2) * (uint64_t)PAIRS;
    if (record_view_take(&v) != 0 || v.events_recorded != want ||
        (thinned ? v.event_bucket_ns == 0 : v.nevents != v.events_recorded)) {
        fprintf(stderr, "record_cost: expected every event logged%s\n",
                thinned ? ", and thinned" : "");
        return 1;
    }
    record_view_free(&v);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "logged") == 0)
        return logged(false);
    if (argc > 1 && strcmp(argv[1], "thinned") == 0)
        return logged(true);
    void *frames[2] = {(void *)0x1000, (void *)0x2000};
    record_init(0, NULL);
    stack = record_stack_intern(1, frames, 2);
    fill(50000);
    pairs_at_50k();
    fill(400000);
    pairs_at_400k();
    struct record_view v;
    if (record_view_take(&v) != 0 || v.counters.live != 400000) {
        fprintf(stderr, "record_cost: expected 400000 live allocations\n");
        return 1;
    }
    record_view_free(&v);
    return 0;
}
