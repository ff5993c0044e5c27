/* test_record.c - the tracker on its own: exact peak attribution against a
 * brute-force model, frees, VMM reference counts, the limit, event thinning
 * and the fork reset. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "record.h"
#include "record_fixture.h"

static struct record_stack *stack_n(unsigned n)
{
    void *frames[2] = {(void *)(uintptr_t)(0x1000 + n), (void *)0x2000};
    return record_stack_intern(1, frames, 2);
}

static const struct record_site_view *site(const struct record_view *v,
                                           const struct record_stack *st,
                                           uint32_t pool)
{
    for (size_t i = 0; i < v->nsites; i++)
        if (v->sites[i].stack == st && v->sites[i].pool == pool)
            return &v->sites[i];
    return NULL;
}

/* Random alloc/free sequence on 8 stacks; a brute-force model copies every
 * stack's holdings at each new peak.  The O(1) epochs must agree exactly. */
static void peak_attribution_matches_brute_force(void **state)
{
    (void)state;
    enum { STACKS = 8, OPS = 20000, SLOTS = 256 };
    struct record_stack *st[STACKS];
    uint64_t held[STACKS] = {0}, at_peak[STACKS] = {0};
    uint64_t cur = 0, peak = 0;
    struct { uintptr_t addr; uint64_t size; int s; } live[SLOTS];
    memset(live, 0, sizeof live);
    for (int i = 0; i < STACKS; i++)
        st[i] = stack_n(100 + (unsigned)i);
    srand(7);
    for (int op = 0; op < OPS; op++) {
        int slot = rand() % SLOTS;
        if (live[slot].addr == 0) {
            int s = rand() % STACKS;
            uint64_t size = (uint64_t)(rand() % 1000 + 1) * 512;
            live[slot].addr = 0x10000000u + (uintptr_t)slot * 0x100000u;
            live[slot].size = size;
            live[slot].s = s;
            alloc(live[slot].addr, size, KIND_DEVICE, 3, st[s], op);
            held[s] += size;
            cur += size;
            if (cur > peak) {
                peak = cur;
                memcpy(at_peak, held, sizeof held);
            }
        } else {
            release(live[slot].addr, op);
            held[live[slot].s] -= live[slot].size;
            cur -= live[slot].size;
            live[slot].addr = 0;
        }
    }
    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.pools[3].peak, peak);
    assert_int_equal(v.pools[3].current, cur);
    uint64_t sum = 0;
    for (int i = 0; i < STACKS; i++) {
        const struct record_site_view *sv = site(&v, st[i], 3);
        assert_non_null(sv);
        assert_int_equal(sv->at_peak, at_peak[i]);
        assert_int_equal(sv->current, held[i]);
        sum += sv->at_peak;
    }
    assert_int_equal(sum, peak);
    record_view_free(&v);
    for (int i = 0; i < SLOTS; i++)
        if (live[i].addr)
            release(live[i].addr, OPS);
}

/* Marks nest up to three deep amid a random alloc/free sequence; a
 * brute-force model keeps every level's peak since its mark and the stacks'
 * holdings at that peak.  The tracker's single O(1) peak per pool must give
 * the innermost level's peak exactly, and its sites whenever it says they
 * are valid - which it must say unless an inner mark ended below the outer
 * peak and no new peak came since. */
static void mark_peaks_match_brute_force(void **state)
{
    (void)state;
    enum { STACKS = 6, OPS = 20000, SLOTS = 128, LEVELS = 4, POOL = 7 };
    struct level {
        uint64_t base, peak, at_peak[STACKS];
        uint64_t outer_peak; /* the enclosing level's peak when this began */
        bool tainted;
        struct record_mark saved[RECORD_POOLS];
    } lv[LEVELS];
    struct record_stack *st[STACKS];
    uint64_t held[STACKS] = {0}, cur = record_current(POOL);
    struct { uintptr_t addr; uint64_t size; int s; } live[SLOTS];
    memset(live, 0, sizeof live);
    memset(lv, 0, sizeof lv);
    for (int i = 0; i < STACKS; i++)
        st[i] = stack_n(200 + (unsigned)i);
    int depth = 0;
    record_mark_set(lv[0].saved, 0); /* level 0: a mark at the start */
    lv[0].base = lv[0].peak = cur;
    srand(11);
    for (int op = 0; op < OPS; op++) {
        int r = rand() % 100;
        if (r < 2 && depth + 1 < LEVELS) {
            depth++;
            record_mark_set(lv[depth].saved, op);
            lv[depth].base = lv[depth].peak = cur;
            lv[depth].outer_peak = lv[depth - 1].peak;
            memcpy(lv[depth].at_peak, held, sizeof held);
            lv[depth].tainted = false;
        } else if (r < 4 && depth > 0) {
            record_mark_restore(lv[depth].saved);
            struct level *in = &lv[depth], *out = &lv[depth - 1];
            /* The model's outer peak and sites followed the inner level
             * already; what the tracker can know is whether the inner
             * peak beat the outer one as it stood when the inner began. */
            assert_int_equal(out->peak, in->peak > in->outer_peak ? in->peak
                                                                   : in->outer_peak);
            out->tainted = in->peak > in->outer_peak ? in->tainted : true;
            depth--;
        } else {
            int slot = rand() % SLOTS;
            if (live[slot].addr == 0) {
                int s = rand() % STACKS;
                uint64_t size = (uint64_t)(rand() % 1000 + 1) * 512;
                live[slot].addr = 0x30000000u + (uintptr_t)slot * 0x100000u;
                live[slot].size = size;
                live[slot].s = s;
                alloc(live[slot].addr, size, KIND_DEVICE, POOL, st[s], op);
                held[s] += size;
                cur += size;
                for (int l = 0; l <= depth; l++)
                    if (cur > lv[l].peak) {
                        lv[l].peak = cur;
                        memcpy(lv[l].at_peak, held, sizeof held);
                        lv[l].tainted = false;
                    }
            } else {
                release(live[slot].addr, op);
                held[live[slot].s] -= live[slot].size;
                cur -= live[slot].size;
                live[slot].addr = 0;
            }
        }
        if (op % 97 != 0 && op != OPS - 1)
            continue;
        struct record_mark m;
        uint64_t now;
        record_mark_get(POOL, &m, &now); /* inactive until the first allocation */
        assert_int_equal(now, cur);
        assert_int_equal(m.base, lv[depth].base);
        assert_int_equal(m.peak, lv[depth].peak);
        assert_int_equal(m.sites_valid, !lv[depth].tainted);
        if (!m.sites_valid)
            continue;
        struct record_view v;
        assert_int_equal(record_view_take(&v), 0);
        assert_int_equal(v.pools[POOL].mark.peak, lv[depth].peak);
        assert_int_equal(v.mark_depth, depth + 1); /* what the writer prints */
        for (int i = 0; i < STACKS; i++) {
            const struct record_site_view *sv = site(&v, st[i], POOL);
            assert_int_equal(sv ? sv->mark_at_peak : 0, lv[depth].at_peak[i]);
        }
        record_view_free(&v);
    }
    for (; depth >= 0; depth--)
        record_mark_restore(lv[depth].saved);
    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.mark_depth, 0);
    record_view_free(&v);
    for (int i = 0; i < SLOTS; i++)
        if (live[i].addr)
            release(live[i].addr, OPS);
}

static void kinds_and_pools_are_separate(void **state)
{
    (void)state;
    struct record_stack *s = stack_n(1);
    alloc(0xa000, 100, KIND_DEVICE, 1, s, 1);
    alloc(0xb000, 200, KIND_MANAGED, 1, s, 2);
    alloc(0xc000, 300, KIND_HOST_PINNED, -1, s, 3);
    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.pools[1].current, 300);
    assert_int_equal(v.pools[1].kinds[KIND_DEVICE].current, 100);
    assert_int_equal(v.pools[1].kinds[KIND_MANAGED].current, 200);
    assert_int_equal(v.pools[RECORD_HOST_POOL].current, 300);
    record_view_free(&v);
    /* cuMemFreeHost must not take a device pointer, nor cuMemFree a host one */
    assert_null(record_free_take(0xa000, KIND_HOST_PINNED, 0));
    assert_null(record_free_take(0xc000, KIND_DEVICE, 0));
    release(0xa000, 4);
    release(0xb000, 5);
    release(0xc000, 6);
    assert_int_equal(record_current(1), 0);
}

/* A destroyed context takes its linear, managed and pinned host memory;
 * pool (async) and VMM memory, other devices and other contexts stay. */
static void context_destroy_forgets_what_it_owned(void **state)
{
    (void)state;
    struct record_stack *s = stack_n(20);
    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    uint64_t host0 = v.pools[RECORD_HOST_POOL].current;
    record_view_free(&v);
    alloc(0x5a000, 100, KIND_DEVICE, 5, s, 1);
    alloc(0x5b000, 200, KIND_MANAGED, 5, s, 2);
    alloc(0x5c000, 300, KIND_HOST_PINNED, 5, s, 3);  /* made in GPU 5's context */
    alloc(0x5d000, 400, KIND_ASYNC, 5, s, 4);
    alloc(0x6a000, 500, KIND_DEVICE, 6, s, 5);
    alloc(0x6c000, 600, KIND_HOST_PINNED, 6, s, 6);  /* GPU 6's context */
    struct record_alloc in_created = {0x5e000, 700, 700, KIND_DEVICE, 5, false, 3, 0};
    record_alloc(&in_created, s, 7);
    struct record_alloc h = {0x5f, 800, 800, KIND_VMM, 5, true, 0, 0};
    record_alloc(&h, s, 8);
    assert_int_equal(record_current(5), 100 + 200 + 400 + 700 + 800);
    assert_int_equal(record_drop_context(5, 0, 9), 100 + 200 + 300);
    assert_int_equal(record_current(5), 400 + 700 + 800);
    assert_int_equal(record_current(6), 500);
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.pools[RECORD_HOST_POOL].current, host0 + 600);
    record_view_free(&v);
    assert_null(record_free_take(0x5a000, KIND_COUNT, 10)); /* gone */
    assert_int_equal(record_drop_context(5, 0, 11), 0);      /* once */
    assert_int_equal(record_drop_context(5, 3, 12), 700);    /* created ctx 3 */
    release(0x5d000, 13);
    release(0x6a000, 14);
    release(0x6c000, 15);
    void *tok = record_vmm_release(0x5f, 16);
    assert_non_null(tok);
    record_free_finish(tok, true, 16);
    assert_int_equal(record_current(5), 0);
}

static void failed_free_puts_the_entry_back(void **state)
{
    (void)state;
    alloc(0xd000, 4096, KIND_DEVICE, 0, stack_n(2), 1);
    void *tok = record_free_take(0xd000, KIND_DEVICE, 0);
    assert_non_null(tok);
    assert_null(record_free_take(0xd000, KIND_DEVICE, 0)); /* taken: not visible */
    record_free_finish(tok, false, 2);
    assert_int_equal(record_current(0), 4096);
    release(0xd000, 3);
    assert_int_equal(record_current(0), 0);
}

static void vmm_handle_freed_at_last_release(void **state)
{
    (void)state;
    struct record_alloc a = {0x77, 2u << 20, 2u << 20, KIND_VMM, 2, true, 0, 0};
    record_alloc(&a, stack_n(3), 1);
    record_vmm_reserve(2, 0x900000000, 8u << 20);
    record_vmm_map(0x900000000, 2u << 20, 0x77);
    assert_true(record_vmm_retain(0x77));
    assert_false(record_vmm_retain(0x78)); /* imported: not ours */
    record_vmm_map(0x900200000, 2u << 20, 0x78);
    assert_null(record_vmm_release(0x77, 0));
    assert_int_equal(record_current(2), 2u << 20);
    void *tok = record_vmm_release(0x77, 0);
    assert_non_null(tok);
    record_free_finish(tok, true, 2);
    assert_int_equal(record_current(2), 0);
    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.pools[2].vmm.mapped, 2u << 20);
    assert_int_equal(v.pools[2].vmm.reserved, 8u << 20);
    record_view_free(&v);
    record_vmm_unmap(0x900000000, 2u << 20);
    record_vmm_unreserve(0x900000000);
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.pools[2].vmm.mapped, 0);
    assert_int_equal(v.pools[2].vmm.reserved, 0);
    assert_int_equal(v.pools[2].vmm.mapped_peak, 2u << 20);
    record_view_free(&v);
}

static void limit_reserves_before_the_call(void **state)
{
    (void)state;
    record_set_limit(5, 1000);
    assert_true(record_limit_reserve(5, 600));
    assert_false(record_limit_reserve(5, 600)); /* in flight counts */
    record_limit_settle(5, 600);
    alloc(0xe000, 600, KIND_DEVICE, 5, stack_n(4), 1);
    assert_false(record_limit_reserve(5, 401));
    assert_true(record_limit_reserve(5, 400));
    record_limit_settle(5, 400);
    release(0xe000, 2);
    record_set_limit(5, 0);
    assert_true(record_limit_reserve(5, UINT64_MAX / 2));
}

static void stacks_are_deduplicated(void **state)
{
    (void)state;
    void *f[3] = {(void *)1, (void *)2, (void *)3};
    struct record_stack *a = record_stack_intern(7, f, 3);
    struct record_stack *b = record_stack_intern(7, f, 3);
    struct record_stack *c = record_stack_intern(8, f, 3); /* other entry */
    struct record_stack *d = record_stack_intern(7, f, 2);
    assert_ptr_equal(a, b);
    assert_ptr_not_equal(a, c);
    assert_ptr_not_equal(a, d);
    assert_int_equal(a->depth, 3);
}

/* The tracker's side of the log: rows carry the pool's exact current and
 * the allocating stack; thinning keeps both allocations and frees (the
 * policy itself is tested in test_event_log.c). */
static void events_thin_without_aliasing(void **state)
{
    (void)state;
    record_atfork_prepare();
    record_atfork_child(); /* a fresh tracker (also tests the reset) */
    record_init(8, NULL);
    struct record_stack *s = stack_n(9);
    for (int i = 0; i < 20; i++) {
        alloc(0xf000, 10, KIND_DEVICE, 0, s, i * 2);
        release(0xf000, i * 2 + 1);
    }
    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.events_recorded, 40);
    assert_true(v.nevents <= 8);
    assert_true(v.event_bucket_ns > 0);
    size_t allocs = 0, frees = 0;
    for (size_t i = 0; i < v.nevents; i++) {
        const struct record_event *e = &v.events[i];
        assert_int_equal(e->stack, s->id);
        assert_int_equal(e->current, e->delta > 0 ? 10 : 0);
        /* an allocation at even times, its free at the next odd one */
        assert_int_equal(e->t_ns % 2, e->delta > 0 ? 0 : 1);
        if (i > 0)
            assert_true(e->t_ns >= v.events[i - 1].t_ns);
        allocs += e->delta > 0;
        frees += e->delta < 0;
    }
    assert_true(allocs > 0);
    assert_true(frees > 0);
    assert_int_equal(v.pools[0].peak, 10);
    assert_int_equal(v.counters.live, 0);
    record_view_free(&v);
}

/* ---- threads ---- */

/* The exact-peak invariant under threads, against a brute-force model.  The
 * tracker logs every event under its lock with the pool's current right
 * after it, so the log is the order the tracker applied them in: replaying
 * it copies every stack's holdings at each new peak, as the single-thread
 * model does.  Workers allocate through both paths (record_alloc_at with its
 * per-thread stack cache, record_alloc with an interned stack), on stacks
 * shared by all threads and stacks of their own, and free each other's
 * allocations through a shared exchange array (entries migrate between
 * threads' free lists).  Run under TSan by make test-tsan. */
enum { WORKERS = 4, WORKER_OPS = 3000, SHARED = 64, TSTACKS = 4 + WORKERS };

static uintptr_t exchange[SHARED];

struct worker {
    unsigned id, seed;
    uintptr_t next_addr;
};

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    for (int op = 0; op < WORKER_OPS; op++) {
        unsigned r = (unsigned)rand_r(&w->seed);
        unsigned slot = r % SHARED;
        uintptr_t old = __atomic_exchange_n(&exchange[slot], 0, __ATOMIC_ACQ_REL);
        if (old != 0) {
            release(old, op);
            continue;
        }
        /* shared stacks 0-3, or this worker's own 4 + id */
        unsigned sn = (r >> 8) % 5 < 4 ? (r >> 8) % 4 : 4 + w->id;
        uint64_t size = (uint64_t)((r >> 12) % 1000 + 1) * 512;
        uintptr_t addr = w->next_addr;
        w->next_addr += 0x1000;
        struct record_alloc a = {addr, size, size, KIND_DEVICE, 3, false, 0, 0};
        if ((r >> 24) & 1) {
            void *frames[2] = {(void *)(uintptr_t)(0x1000 + 200 + sn), (void *)0x2000};
            record_alloc_at(&a, 1, frames, 2, op);
        } else {
            record_alloc(&a, stack_n(200 + sn), op);
        }
        old = __atomic_exchange_n(&exchange[slot], addr, __ATOMIC_ACQ_REL);
        if (old != 0) /* another worker published here meanwhile */
            release(old, op);
    }
    record_thread_end();
    return NULL;
}

static void peak_attribution_matches_brute_force_under_threads(void **state)
{
    (void)state;
    record_atfork_prepare();
    record_atfork_child(); /* a fresh tracker */
    record_init(1u << 16, NULL); /* every event kept: the model replays them */
    struct record_stack *st[TSTACKS];
    for (unsigned i = 0; i < TSTACKS; i++)
        st[i] = stack_n(200 + i);
    memset(exchange, 0, sizeof exchange);
    pthread_t t[WORKERS];
    struct worker w[WORKERS];
    for (unsigned i = 0; i < WORKERS; i++) {
        w[i] = (struct worker){i, 11 + i, (uintptr_t)(i + 1) << 32};
        assert_int_equal(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
    }
    for (unsigned i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);

    struct record_view v;
    assert_int_equal(record_view_take(&v), 0);
    assert_int_equal(v.events_recorded, v.nevents); /* nothing thinned */
    uint64_t held[TSTACKS + 2] = {0}, at_peak[TSTACKS + 2] = {0};
    uint64_t cur = 0, peak = 0;
    for (size_t i = 0; i < v.nevents; i++) {
        const struct record_event *e = &v.events[i];
        assert_int_equal(e->pool, 3);
        unsigned k = 0;
        while (k < TSTACKS && st[k]->id != e->stack)
            k++;
        assert_true(k < TSTACKS);
        held[k] += (uint64_t)e->delta;
        cur += (uint64_t)e->delta;
        assert_int_equal(e->current, cur); /* the log is the tracker's order */
        /* the workers' times go back and forth; the rows' never do */
        if (i > 0)
            assert_true(e->t_ns >= v.events[i - 1].t_ns);
        if (cur > peak) {
            peak = cur;
            memcpy(at_peak, held, sizeof held);
        }
    }
    assert_int_equal(v.pools[3].peak, peak);
    assert_int_equal(v.pools[3].current, cur);
    uint64_t sum = 0, live = 0;
    for (unsigned i = 0; i < TSTACKS; i++) {
        const struct record_site_view *sv = site(&v, st[i], 3);
        assert_non_null(sv);
        assert_int_equal(sv->at_peak, at_peak[i]);
        assert_int_equal(sv->current, held[i]);
        sum += sv->at_peak;
    }
    assert_int_equal(sum, peak);
    for (unsigned i = 0; i < SHARED; i++)
        live += exchange[i] != 0;
    assert_int_equal(v.counters.live, live);
    assert_int_equal(v.counters.unknown_frees, 0);
    record_view_free(&v);
    for (unsigned i = 0; i < SHARED; i++)
        if (exchange[i] != 0)
            release(exchange[i], WORKER_OPS);
}

/* A free reads its entry's site outside the lock (record_token_stack, as
 * hooks_free_end does) while other threads' new call sites grow the site
 * table: the table it reads must stay valid.  Under TSan (make test-tsan)
 * and ASan (make test-san) a table freed by the growth is caught. */
enum { GROW_SITES = 5000 };

static void *grow_sites(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < GROW_SITES; i++)
        alloc(0x700000000ull + (uintptr_t)i * 0x1000, 512, KIND_DEVICE, 1,
              stack_n(5000 + i), i);
    return NULL;
}

static void token_site_survives_site_table_growth(void **state)
{
    (void)state;
    record_atfork_prepare();
    record_atfork_child(); /* a fresh tracker: its site table starts small */
    record_init(0, NULL);
    struct record_stack *mine = stack_n(4999);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, grow_sites, NULL), 0);
    for (int i = 0; i < 20000; i++) {
        alloc(0x600000000ull, 512, KIND_DEVICE, 0, mine, i);
        void *tok = record_free_take(0x600000000ull, KIND_COUNT, i);
        assert_non_null(tok);
        assert_int_equal(record_token_stack(tok), mine->id);
        record_free_finish(tok, true, i);
    }
    pthread_join(t, NULL);
    for (unsigned i = 0; i < GROW_SITES; i++)
        release(0x700000000ull + (uintptr_t)i * 0x1000, GROW_SITES);
}

/* CUMEMTRACE_DEBUG (test_record_debug, the sanitizer builds): a *_locked
 * function called without the tracker's lock aborts on its owner assert;
 * every other test here then runs with each such call checked. */
void record_stacks_reset_locked(void);
static void locked_function_without_the_lock_aborts(void **state)
{
    (void)state;
#ifdef CUMEMTRACE_DEBUG
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        fclose(stderr); /* the assert's message is expected */
        record_stacks_reset_locked();
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
#else
    skip(); /* the owner assert is compiled in with CUMEMTRACE_DEBUG only */
#endif
}

int main(void)
{
    record_init(1024, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(peak_attribution_matches_brute_force),
        cmocka_unit_test(mark_peaks_match_brute_force),
        cmocka_unit_test(kinds_and_pools_are_separate),
        cmocka_unit_test(context_destroy_forgets_what_it_owned),
        cmocka_unit_test(failed_free_puts_the_entry_back),
        cmocka_unit_test(vmm_handle_freed_at_last_release),
        cmocka_unit_test(limit_reserves_before_the_call),
        cmocka_unit_test(stacks_are_deduplicated),
        cmocka_unit_test(events_thin_without_aliasing),
        cmocka_unit_test(peak_attribution_matches_brute_force_under_threads),
        cmocka_unit_test(token_site_survives_site_table_growth),
        cmocka_unit_test(locked_function_without_the_lock_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
