/* record_fixture.h - the tracker driven as the wrappers drive it, for the
 * unit tests that build a tracker state (test_record.c, test_serialise.c).
 * Include after <cmocka.h> and record.h. */
#ifndef CUMEMTRACE_TEST_RECORD_FIXTURE_H
#define CUMEMTRACE_TEST_RECORD_FIXTURE_H

/* A successful allocation of `size` bytes at `addr`, made at stack `st`. */
static inline void alloc(uintptr_t addr, uint64_t size, enum record_kind kind,
                         int dev, struct record_stack *st, int64_t t)
{
    struct record_alloc a = {addr, size, size, kind, dev, false, 0, 0};
    record_alloc(&a, st, t);
}

/* The free of a live allocation, whose real free succeeded. */
static inline void release(uintptr_t addr, int64_t t)
{
    void *tok = record_free_take(addr, KIND_COUNT, t);
    assert_non_null(tok);
    record_free_finish(tok, true, t);
}

#endif
