/* record_cost.c - the tracker's added cost per allocation at two sizes of
 * the live table, for tests/e2e/test_record_cost.py, which runs it under
 * callgrind and compares the instructions of pairs_at_50k and
 * pairs_at_400k: a hash table that keeps its load factor costs the same at
 * both; one that stops growing costs eight times more at 400 k.
 *
 * The live allocations are 2 KiB apart, like a caching allocator's small
 * blocks: the address stride the tracker's hash must spread. */
#include <stdint.h>
#include <stdio.h>

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

int main(void)
{
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
