/* test_record_threads.c - the exact peak and its attribution at 2-8
 * threads.  Whatever order the threads' events reach the tracker in, the
 * result must be the single-threaded tracker's on that same order: each run
 * lets 2-8 workers allocate and free at random (shared and own stacks, two
 * devices and pinned host memory, frees of each other's allocations, failed
 * frees put back, unknown and wrong-kind frees) while a reader takes views
 * and nests marks; then a fresh tracker replays the run's event log - the
 * merged order - on one thread, and every figure must agree: the pools'
 * current, peak and its time, per kind; every site's current, at_peak,
 * churn and temporary count; the mark's peak and its sites; each row.
 * Every view, the reader's mid-run ones included, must hold the invariant
 * that the sites' at_peak of a pool sum to its peak.
 *
 * Each allocation has a size of its own (the low 20 bits number it), so a
 * log row names the allocation it is about and the replay can free the
 * same one (what makes its temporary counts comparable) and tell a failed
 * free's put-back from a new allocation.  Run under TSan by make test-tsan. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "record.h"

enum {
    MAX_WORKERS = 8,
    SHARED_STACKS = 6, /* stacks every worker allocates from; then one each */
    EXCHANGE = 96,     /* allocations any worker may free */
    UNIQUE_BITS = 20,  /* a size's low bits number its allocation */
    LOG_CAP = 1 << 17,
};

static struct record_stack *stack_n(unsigned n)
{
    void *frames[2] = {(void *)(uintptr_t)(0x1000 + n), (void *)0x2000};
    return record_stack_intern(1, frames, 2);
}

/* A worker's address for allocation number `id` of `kind`: unique, with
 * the kind in bits 4-6 (so a freeing worker knows it). */
static uintptr_t addr_of(uint64_t id, enum record_kind kind)
{
    return (uintptr_t)1 << 40 | (uintptr_t)id << 12 | (uintptr_t)kind << 4;
}

static struct {
    unsigned workers, ops;
    uintptr_t exchange[EXCHANGE];
    uint64_t next_id;       /* allocations numbered so far */
    int64_t clock;          /* a clock every thread reads: fetch-add */
    uint64_t unknown, wrong_kind; /* refused frees the workers made */
    int done;               /* workers finished: the reader stops */
    uint64_t views;         /* mid-run views the reader checked */
    int reading;            /* the reader runs: workers wait for its views */
} run;

static int64_t now(void)
{
    return __atomic_add_fetch(&run.clock, 1, __ATOMIC_RELAXED);
}

/* The sites' at_peak of each pool sum to its peak, their current to its
 * current, and the same for the mark while its sites are attributed. */
static void invariant_holds(const struct record_view *v)
{
    for (unsigned p = 0; p < RECORD_POOLS; p++) {
        uint64_t at_peak = 0, current = 0, mark = 0, kinds = 0;
        for (size_t i = 0; i < v->nsites; i++) {
            const struct record_site_view *s = &v->sites[i];
            if (s->pool != p)
                continue;
            at_peak += s->at_peak;
            current += s->current;
            mark += s->mark_at_peak;
        }
        for (unsigned k = 0; k < KIND_COUNT; k++)
            kinds += v->pools[p].kinds[k].current;
        assert_int_equal(at_peak, v->pools[p].peak);
        assert_int_equal(current, v->pools[p].current);
        assert_int_equal(kinds, v->pools[p].current);
        assert_true(v->pools[p].peak >= v->pools[p].current);
        if (v->pools[p].mark.sites_valid)
            assert_int_equal(mark, v->pools[p].mark.peak);
    }
}

/* A free the tracker refuses gives no token. */
static void refused(void *token)
{
    assert_null(token);
}

/* Frees `addr` as the wrappers do: take, the real free, finish.  One in 32
 * real frees fails (the entry goes back, and is freed again); a pinned
 * allocation is sometimes first freed with the device API (refused). */
static void release(uintptr_t addr, unsigned r)
{
    enum record_kind kind = (enum record_kind)(addr >> 4 & 7);
    if (kind == KIND_HOST_PINNED && r % 8 == 0) {
        refused(record_free_take(addr, KIND_DEVICE, now()));
        __atomic_fetch_add(&run.wrong_kind, 1, __ATOMIC_RELAXED);
    }
    void *tok = record_free_take(addr, kind == KIND_HOST_PINNED ? KIND_HOST_PINNED : KIND_DEVICE,
                                 now());
    assert_non_null(tok);
    if (r % 32 == 1) {
        record_free_finish(tok, false, now());
        tok = record_free_take(addr, KIND_COUNT, now());
        assert_non_null(tok);
    }
    record_free_finish(tok, true, now());
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, seed = run.workers * 1000 + id;
    bool reading = __atomic_load_n(&run.reading, __ATOMIC_ACQUIRE);
    uint64_t views_before = __atomic_load_n(&run.views, __ATOMIC_ACQUIRE);
    for (unsigned op = 0; op < run.ops; op++) {
        /* Halfway, a view taken since this worker started: without the
         * wait a loaded machine can leave the reader unscheduled until the
         * workers are done, and no view is mid-run. */
        for (unsigned w = 0; reading && op == run.ops / 2 &&
                             __atomic_load_n(&run.views, __ATOMIC_ACQUIRE) == views_before;
             w++) {
            assert_true(w < 10 * 1000 * 1000); /* the reader is stuck: fail, don't hang */
            sched_yield();
        }
        unsigned r = (unsigned)rand_r(&seed);
        if (r % 61 == 0) { /* never allocated: unknown */
            refused(record_free_take(0xdead0000u + r % 4096 * 16, KIND_COUNT, now()));
            __atomic_fetch_add(&run.unknown, 1, __ATOMIC_RELAXED);
            continue;
        }
        uintptr_t *slot = &run.exchange[(r >> 4) % EXCHANGE];
        uintptr_t old = __atomic_exchange_n(slot, 0, __ATOMIC_ACQ_REL);
        if (old != 0) {
            release(old, r >> 8);
            continue;
        }
        uint64_t n = __atomic_fetch_add(&run.next_id, 1, __ATOMIC_RELAXED) + 1;
        assert_true(n < 1u << UNIQUE_BITS);
        static const enum record_kind kinds[4] = {KIND_DEVICE, KIND_DEVICE, KIND_MANAGED,
                                                  KIND_HOST_PINNED};
        enum record_kind kind = kinds[(r >> 10) % 4];
        unsigned sn = (r >> 12) % 4 < 3 ? (r >> 14) % SHARED_STACKS : SHARED_STACKS + id;
        uint64_t size = (uint64_t)((r >> 16) % 1000 + 1) << UNIQUE_BITS | n;
        struct record_alloc a = {addr_of(n, kind), size, size, kind, (r >> 26) & 1 ? 3 : 0,
                                 false, 0, 0};
        if ((r >> 27) & 1) { /* the wrappers' path: the stack by its frames */
            void *frames[2] = {(void *)(uintptr_t)(0x1000 + sn), (void *)0x2000};
            record_alloc_at(&a, 1, frames, 2, now());
        } else {
            record_alloc(&a, stack_n(sn), now());
        }
        old = __atomic_exchange_n(slot, a.addr, __ATOMIC_ACQ_REL);
        if (old != 0) /* another worker published here meanwhile */
            release(old, r >> 8);
    }
    record_thread_end();
    return NULL;
}

/* Mid-run views, each checked, and nested marks set and restored around
 * them (restored before the end: the final mark is the outer one). */
static void *reader(void *arg)
{
    (void)arg;
    static struct record_mark saved[RECORD_POOLS];
    unsigned i = 0;
    while (!__atomic_load_n(&run.done, __ATOMIC_ACQUIRE)) {
        bool nest = i++ % 4 == 0;
        if (nest)
            record_mark_set(saved, now());
        struct record_view v;
        assert_int_equal(record_view_take(&v), 0);
        invariant_holds(&v);
        record_view_free(&v);
        if (nest)
            record_mark_restore(saved);
        __atomic_fetch_add(&run.views, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void fresh_tracker(void)
{
    record_atfork_prepare();
    record_atfork_child();
    /* every event kept: the replay needs them */
    record_init(LOG_CAP, now);
}

static const struct record_site_view *site_of(const struct record_view *v, uint32_t stack,
                                              uint32_t pool, uint8_t kind)
{
    for (size_t i = 0; i < v->nsites; i++) {
        const struct record_site_view *s = &v->sites[i];
        if (s->stack != NULL && s->stack->id == stack && s->pool == pool && s->kind == kind)
            return s;
    }
    return NULL;
}

/* The replay's tokens of taken entries, by allocation number: a row that
 * adds an allocation already taken is its failed free's put-back. */
static void *taken[1u << UNIQUE_BITS];

/* Replays `rows` on this thread into a fresh tracker, with the mark of the
 * threaded run set before row `mark_at` at its time. */
static void replay(const struct record_event *rows, size_t n, size_t mark_at,
                   int64_t mark_time)
{
    static struct record_mark saved[RECORD_POOLS];
    struct record_stack *st[SHARED_STACKS + MAX_WORKERS];
    for (unsigned i = 0; i < SHARED_STACKS + MAX_WORKERS; i++)
        assert_int_equal((st[i] = stack_n(i))->id, i + 1); /* the run's ids */
    memset(taken, 0, sizeof taken);
    for (size_t i = 0; i < n; i++) {
        if (i == mark_at)
            record_mark_set(saved, mark_time);
        const struct record_event *e = &rows[i];
        enum record_kind kind = (enum record_kind)e->kind;
        uint64_t size = (uint64_t)(e->delta < 0 ? -e->delta : e->delta);
        uint64_t id = size & ((1u << UNIQUE_BITS) - 1);
        uintptr_t addr = addr_of(id, kind);
        if (e->delta > 0 && taken[id] != NULL) {
            record_free_finish(taken[id], false, e->t_ns);
            taken[id] = NULL;
        } else if (e->delta > 0) {
            struct record_alloc a = {addr, size, size, kind, e->pool < 0 ? 0 : e->pool,
                                     false, 0, 0};
            assert_true(e->stack >= 1 && e->stack <= SHARED_STACKS + MAX_WORKERS);
            record_alloc(&a, st[e->stack - 1], e->t_ns);
        } else {
            taken[id] = record_free_take(addr, KIND_COUNT, e->t_ns);
            assert_non_null(taken[id]);
        }
    }
    for (size_t id = 0; id < 1u << UNIQUE_BITS; id++)
        if (taken[id] != NULL)
            record_free_finish(taken[id], true, 0);
}

static void kinds_equal(const struct record_kind_stats *a, const struct record_kind_stats *b)
{
    assert_int_equal(a->current, b->current);
    assert_int_equal(a->peak, b->peak);
    assert_int_equal(a->peak_time, b->peak_time);
    assert_int_equal(a->allocs, b->allocs);
    assert_int_equal(a->frees, b->frees);
    assert_int_equal(a->failures, b->failures);
}

/* The threaded run's final view `t` against the replay's `s`; ids[i] is
 * the stack id of t's site i (t's stacks were the old tracker's). */
static void views_equal(const struct record_view *t, const uint32_t *ids,
                        const struct record_view *s)
{
    assert_int_equal(t->nevents, s->nevents);
    for (size_t i = 0; i < t->nevents; i++)
        assert_memory_equal(&t->events[i], &s->events[i], sizeof t->events[i]);
    assert_int_equal(t->nstacks, s->nstacks);
    for (unsigned p = 0; p < RECORD_POOLS; p++) {
        const struct record_pool_view *a = &t->pools[p], *b = &s->pools[p];
        assert_int_equal(a->active, b->active);
        assert_int_equal(a->current, b->current);
        assert_int_equal(a->peak, b->peak);
        assert_int_equal(a->peak_time, b->peak_time);
        for (unsigned k = 0; k < KIND_COUNT; k++)
            kinds_equal(&a->kinds[k], &b->kinds[k]);
        /* the reader's nested marks, all restored, leave the outer mark's
         * peak exact; its sites stay attributed unless a nested mark's
         * restore had to drop them (record_mark_restore) */
        assert_int_equal(a->mark.base, b->mark.base);
        assert_int_equal(a->mark.time, b->mark.time);
        assert_int_equal(a->mark.peak, b->mark.peak);
        assert_int_equal(a->mark.peak_time, b->mark.peak_time);
        assert_true(b->mark.sites_valid);
        for (unsigned b2 = 0; b2 < 65; b2++) {
            assert_int_equal(a->hist_count[b2], b->hist_count[b2]);
            assert_int_equal(a->hist_bytes[b2], b->hist_bytes[b2]);
        }
    }
    assert_int_equal(t->nsites, s->nsites);
    for (size_t i = 0; i < t->nsites; i++) {
        const struct record_site_view *a = &t->sites[i];
        const struct record_site_view *b = site_of(s, ids[i], a->pool, a->kind);
        assert_non_null(b);
        assert_int_equal(a->current, b->current);
        assert_int_equal(a->count, b->count);
        assert_int_equal(a->at_peak, b->at_peak);
        assert_int_equal(a->at_peak_count, b->at_peak_count);
        assert_int_equal(a->allocs, b->allocs);
        assert_int_equal(a->frees, b->frees);
        assert_int_equal(a->alloc_bytes, b->alloc_bytes);
        assert_int_equal(a->temporary, b->temporary);
        if (t->pools[a->pool].mark.sites_valid) {
            assert_int_equal(a->mark_at_peak, b->mark_at_peak);
            assert_int_equal(a->mark_at_peak_count, b->mark_at_peak_count);
        }
    }
    assert_int_equal(t->counters.live, s->counters.live);
    assert_int_equal(t->counters.failed_frees, s->counters.failed_frees);
}

/* One run of `workers` threads: two rounds of `ops` operations each, the
 * mark set between them (all threads at rest, so its place in the order is
 * known), the reader running through the second. */
static void threads_equal_their_replay(unsigned workers, unsigned ops)
{
    fresh_tracker();
    memset(&run, 0, sizeof run);
    run.workers = workers;
    run.ops = ops;
    /* the stacks by number, interned in order: the replay's ids are the same */
    for (unsigned n = 0; n < SHARED_STACKS + MAX_WORKERS; n++)
        assert_int_equal(stack_n(n)->id, n + 1);
    pthread_t t[MAX_WORKERS], rd;
    size_t mark_at = 0;
    int64_t mark_time = 0;
    static struct record_mark outer[RECORD_POOLS];
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            struct record_view v;
            assert_int_equal(record_view_take(&v), 0);
            mark_at = v.nevents;
            record_view_free(&v);
            record_mark_set(outer, mark_time = now());
            __atomic_store_n(&run.reading, 1, __ATOMIC_RELEASE);
            assert_int_equal(pthread_create(&rd, NULL, reader, NULL), 0);
        }
        for (unsigned i = 0; i < workers; i++)
            assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i), 0);
        for (unsigned i = 0; i < workers; i++)
            pthread_join(t[i], NULL);
    }
    __atomic_store_n(&run.done, 1, __ATOMIC_RELEASE);
    pthread_join(rd, NULL);

    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.events_recorded, v.nevents); /* nothing thinned */
    assert_true(mark_at > 0 && mark_at < v.nevents);
    invariant_holds(&v);
    uint64_t live = 0;
    for (unsigned i = 0; i < EXCHANGE; i++)
        live += run.exchange[i] != 0;
    assert_int_equal(v.counters.live, live);
    assert_int_equal(v.counters.unknown_frees, run.unknown);
    assert_int_equal(v.counters.wrong_kind_frees, run.wrong_kind);
    assert_true(v.counters.failed_frees > 0);
    assert_int_equal(v.mark_depth, 1);
    /* the rows' own order: times never go back, each current follows */
    uint64_t cur[RECORD_POOLS] = {0};
    for (size_t i = 0; i < v.nevents; i++) {
        const struct record_event *e = &v.events[i];
        unsigned p = e->pool < 0 ? RECORD_HOST_POOL : (unsigned)e->pool;
        cur[p] += (uint64_t)e->delta;
        assert_int_equal(e->current, cur[p]);
        if (i > 0)
            assert_true(e->t_ns >= v.events[i - 1].t_ns);
    }

    struct record_event *rows = malloc(v.nevents * sizeof *rows);
    assert_non_null(rows);
    memcpy(rows, v.events, v.nevents * sizeof *rows);
    uint32_t *ids = malloc(v.nsites * sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < v.nsites; i++)
        ids[i] = v.sites[i].stack->id;
    fresh_tracker();
    replay(rows, v.nevents, mark_at, mark_time);
    /* the allocations still live, freed in the replay as in the run: same */
    struct record_view s;
    assert_int_equal(record_view_take(&s), 0);
    invariant_holds(&s);
    views_equal(&v, ids, &s);
    record_view_free(&s);
    record_view_free(&v);
    free(rows);
    free(ids);
    assert_true(run.views > 0);
}

static void two_threads(void **state)
{
    (void)state;
    threads_equal_their_replay(2, 6000);
}

static void three_to_eight_threads(void **state)
{
    (void)state;
    for (unsigned n = 3; n <= MAX_WORKERS; n++)
        threads_equal_their_replay(n, 3000);
}

/* A thread that allocated and ended: its allocations stay live, and every
 * reader of the live table finds them - a view, the live ranges an OOM
 * report lays out, a free by another thread, a context's destroy. */
enum { TABLE_ALLOCS = 100 };

static void *allocate_and_end(void *arg)
{
    (void)arg;
    void *frames[2] = {(void *)0x1000, (void *)0x2000};
    for (uint64_t n = 1; n <= TABLE_ALLOCS; n++) {
        uint64_t size = n << UNIQUE_BITS | n;
        struct record_alloc a = {addr_of(n, KIND_DEVICE), size, size, KIND_DEVICE, 0,
                                 false, 0, 0};
        record_alloc_at(&a, 1, frames, 2, now());
        /* a pair in between: its free parks the entry the next one takes */
        struct record_alloc b = {addr_of(n + 1000, KIND_DEVICE), 4096, 4096, KIND_DEVICE, 0,
                                 false, 0, 0};
        record_alloc_at(&b, 1, frames, 2, now());
        void *tok = record_free_take(b.addr, KIND_DEVICE, now());
        assert_non_null(tok);
        record_free_finish(tok, true, now());
    }
    record_thread_end();
    return NULL;
}

static void an_ended_threads_allocations_are_read_by_everyone(void **state)
{
    (void)state;
    fresh_tracker();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, allocate_and_end, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    uint64_t bytes = 0;
    for (uint64_t n = 1; n <= TABLE_ALLOCS; n++)
        bytes += n << UNIQUE_BITS | n;

    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.counters.live, TABLE_ALLOCS);
    assert_int_equal(v.pools[0].current, bytes);
    uint64_t hist = 0;
    for (unsigned b = 0; b < 65; b++)
        hist += v.pools[0].hist_count[b];
    assert_int_equal(hist, TABLE_ALLOCS);
    invariant_holds(&v);
    record_view_free(&v);

    struct record_range *ranges = NULL;
    assert_int_equal(record_live_ranges(0, &ranges), TABLE_ALLOCS);
    uint64_t ranged = 0;
    for (unsigned i = 0; i < TABLE_ALLOCS; i++)
        ranged += ranges[i].size;
    assert_int_equal(ranged, bytes);
    free(ranges);

    uint64_t first = 1u << UNIQUE_BITS | 1;
    void *tok = record_free_take(addr_of(1, KIND_DEVICE), KIND_DEVICE, now());
    assert_non_null(tok);
    assert_int_equal(record_token_size(tok), first);
    record_free_finish(tok, true, now());
    assert_int_equal(record_drop_context(0, 0, now()), bytes - first);

    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.counters.live, 0);
    assert_int_equal(v.pools[0].current, 0);
    assert_int_equal(v.counters.unknown_frees, 0);
    invariant_holds(&v);
    record_view_free(&v);
}

int main(void)
{
    record_init(LOG_CAP, now);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_threads),
        cmocka_unit_test(three_to_eight_threads),
        cmocka_unit_test(an_ended_threads_allocations_are_read_by_everyone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
