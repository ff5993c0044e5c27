/* test_event_log.c - the event log on its own: thinning keeps exactly the
 * first lowest and first highest row of each pool in each time bucket (so a
 * periodic workload keeps both its allocations and its frees), rows stay in
 * time order and unaltered, and memory grows with the rows, not the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "event_log.h"

/* Every pushed event, in order; `stack` holds its index so a kept row can
 * be matched to what was pushed. */
static struct record_event *pushed;
static size_t npushed, room;

static void start(size_t cap)
{
    event_log_reset();
    event_log_init(cap, NULL);
    free(pushed);
    pushed = NULL;
    npushed = room = 0;
}

static void push(int64_t t, int64_t delta, uint64_t current, int16_t pool)
{
    if (npushed == room) {
        room = room ? room * 2 : 4096;
        pushed = realloc(pushed, room * sizeof *pushed);
        assert_non_null(pushed);
    }
    struct record_event ev;
    memset(&ev, 0, sizeof ev); /* the padding too: rows are compared whole */
    ev.t_ns = event_log_stamp(t);
    ev.delta = delta;
    ev.current = current;
    ev.stack = (uint32_t)npushed;
    ev.pool = pool;
    pushed[npushed++] = ev;
    event_log_add(ev.t_ns, delta, current, record_event_tag(ev.stack, pool, 0));
}

static struct record_event *kept(size_t *n)
{
    struct event_log_stats s = event_log_stats();
    struct record_event *out = malloc((s.kept ? s.kept : 1) * sizeof *out);
    assert_non_null(out);
    event_log_copy(out, 0);
    *n = s.kept;
    return out;
}

/* Rows are pushed events, unaltered, in push order (so in time order). */
static void assert_rows_are_events(const struct record_event *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(r[i].stack < npushed);
        assert_memory_equal(&r[i], &pushed[r[i].stack], sizeof r[i]);
        if (i > 0) {
            assert_true(r[i].stack > r[i - 1].stack);
            assert_true(r[i].t_ns >= r[i - 1].t_ns);
        }
    }
}

/* What thinning must keep: over ALL pushed events, per bucket of
 * 2^shift ns and per pool, the first lowest and the first highest. */
static void assert_extrema_of_every_bucket(const struct record_event *r,
                                           size_t n, uint64_t bucket_ns)
{
    bool *keep = calloc(npushed, sizeof *keep);
    assert_non_null(keep);
    size_t i = 0, want = 0;
    while (i < npushed) {
        int64_t b = pushed[i].t_ns / (int64_t)bucket_ns;
        size_t j = i;
        while (j < npushed && pushed[j].t_ns / (int64_t)bucket_ns == b)
            j++;
        for (int16_t pool = -1; pool < 64; pool++) {
            size_t lo = SIZE_MAX, hi = SIZE_MAX;
            for (size_t k = i; k < j; k++) {
                if (pushed[k].pool != pool)
                    continue;
                if (lo == SIZE_MAX || pushed[k].current < pushed[lo].current)
                    lo = k;
                if (hi == SIZE_MAX || pushed[k].current > pushed[hi].current)
                    hi = k;
            }
            if (lo != SIZE_MAX)
                keep[lo] = keep[hi] = true;
        }
        i = j;
    }
    for (size_t k = 0; k < npushed; k++)
        want += keep[k];
    assert_int_equal(n, want);
    for (size_t k = 0; k < n; k++)
        assert_true(keep[r[k].stack]);
    free(keep);
}

/* The aliasing case: alloc/free pairs far past the cap, one event per ns.
 * Keeping every 2^k-th event would keep only the allocations. */
static void periodic_pairs_keep_allocs_and_frees(void **state)
{
    (void)state;
    start(1000);
    for (int i = 0; i < 200000; i++)
        push(i, i % 2 ? -4096 : 4096, i % 2 ? 0 : 4096, 0);
    size_t n, allocs = 0, frees = 0;
    struct record_event *r = kept(&n);
    struct event_log_stats s = event_log_stats();
    assert_int_equal(s.recorded, 200000);
    assert_true(s.bucket_ns > 1);
    assert_true(n <= 1000);
    assert_true(n >= 250); /* thinned to half the cap at most, then refilled */
    assert_rows_are_events(r, n);
    for (size_t i = 0; i < n; i++) {
        allocs += r[i].delta > 0;
        frees += r[i].delta < 0;
    }
    printf("kept %zu of 200000: %zu allocations, %zu frees, bucket %llu ns\n",
           n, allocs, frees, (unsigned long long)s.bucket_ns);
    assert_true(allocs * 3 >= n); /* both sides, about half each */
    assert_true(frees * 3 >= n);
    assert_extrema_of_every_bucket(r, n, s.bucket_ns);
    free(r);
}

/* A random walk on three pools with bursts and pauses: what is kept is
 * exactly the extrema of every bucket, so each pool's peak survives. */
static void random_walk_keeps_exact_extrema(void **state)
{
    (void)state;
    start(300);
    uint64_t cur[3] = {0};
    int64_t t = 0;
    srand(11);
    for (int i = 0; i < 50000; i++) {
        int p = rand() % 3;
        int64_t d = (int64_t)(rand() % 64 + 1) * 512;
        if (cur[p] >= (uint64_t)d && rand() % 2)
            d = -d;
        cur[p] += (uint64_t)d;
        t += rand() % 10 == 0 ? rand() % 100000 : rand() % 50;
        push(t, d, cur[p], (int16_t)(p == 2 ? -1 : p));
    }
    size_t n;
    struct record_event *r = kept(&n);
    assert_true(n <= 300);
    assert_rows_are_events(r, n);
    assert_extrema_of_every_bucket(r, n, event_log_stats().bucket_ns);
    for (int16_t pool = -1; pool < 2; pool++) {
        uint64_t peak = 0, kept_peak = 0;
        for (size_t k = 0; k < npushed; k++)
            if (pushed[k].pool == pool && pushed[k].current > peak)
                peak = pushed[k].current;
        for (size_t k = 0; k < n; k++)
            if (r[k].pool == pool && r[k].current > kept_peak)
                kept_peak = r[k].current;
        assert_int_equal(kept_peak, peak);
    }
    free(r);
}

/* Under the cap nothing is dropped; stamps never go back. */
static void below_the_cap_everything_is_kept(void **state)
{
    (void)state;
    start(100);
    for (int i = 0; i < 100; i++)
        push(i % 7 == 3 ? i - 2 : i, 1, (uint64_t)i, 0); /* some go back */
    size_t n;
    struct record_event *r = kept(&n);
    assert_int_equal(n, 100);
    assert_int_equal(event_log_stats().bucket_ns, 0);
    assert_rows_are_events(r, n);
    free(r);
}

static int64_t fake_clock_ns;
static int fake_clock_reads;

static int64_t fake_clock(void)
{
    fake_clock_reads++;
    return fake_clock_ns;
}

/* A row's time is the caller's, read before the lock, made non-decreasing:
 * no clock read inside the critical section, except for a caller late by
 * more than EVENT_LOG_LATE_NS (preempted between its reading and the lock),
 * whom the clock re-stamps.  event_log_add writes the whole row. */
static void rows_take_the_callers_time_in_order(void **state)
{
    (void)state;
    event_log_reset();
    event_log_init(16, fake_clock);
    fake_clock_ns = 1000000;
    fake_clock_reads = 0;
    assert_int_equal(event_log_stamp(500000), 500000);
    assert_int_equal(event_log_stamp(499000), 500000); /* waited for the lock */
    assert_int_equal(fake_clock_reads, 0);
    assert_int_equal(event_log_stamp(500000 - EVENT_LOG_LATE_NS - 1), 1000000);
    assert_int_equal(fake_clock_reads, 1);
    assert_int_equal(event_log_stamp(999999), 1000000);
    assert_int_equal(event_log_stamp(1000001), 1000001);

    event_log_add(1000001, -4096, 12, record_event_tag(7, -1, 4));
    struct record_event want;
    memset(&want, 0, sizeof want);
    want.t_ns = 1000001;
    want.delta = -4096;
    want.current = 12;
    want.stack = 7;
    want.pool = -1;
    want.kind = 4;
    struct event_log_stats st = event_log_stats();
    assert_int_equal(st.kept, 1);
    assert_int_equal(st.recorded, 1);
    struct record_event got[1];
    event_log_copy(got, 0);
    assert_memory_equal(&got[0], &want, sizeof want);
    event_log_init(16, NULL); /* the later tests' stamps are their own */
}

/* A reader that took the rows once sees, next time, exactly the rows
 * pushed since: in an unthinned log by count, in a thinned one (rows
 * dropped and replaced since) by time; event_log_copy from there hands
 * them over unaltered. */
static int64_t last_t(void)
{
    size_t n;
    struct record_event *r = kept(&n);
    int64_t t = n > 0 ? r[n - 1].t_ns : 0;
    free(r);
    return t;
}

static void fresh_rows_are_those_pushed_since(void **state)
{
    (void)state;
    start(1024);
    assert_int_equal(event_log_fresh_from(0, 0), 0);
    for (int i = 0; i < 100; i++)
        push(10 * i, 1, (uint64_t)i, 0);
    struct event_log_stats s = event_log_stats();
    int64_t last = last_t();
    assert_int_equal(last, 990);
    for (int i = 100; i < 130; i++)
        push(10 * i, 1, (uint64_t)i, 0);
    size_t from = event_log_fresh_from(s.recorded, last);
    assert_int_equal(from, 100);
    struct record_event got[30];
    event_log_copy(got, from);
    assert_memory_equal(got, &pushed[100], sizeof got);
    /* nothing new: nothing fresh */
    s = event_log_stats();
    assert_int_equal(event_log_fresh_from(s.recorded, last_t()), s.kept);

    /* past the cap the log thins: the fresh rows are those stamped after */
    start(64);
    for (int i = 0; i < 200; i++)
        push(10 * i, i % 2 ? -1 : 1, (uint64_t)(i % 7), 0);
    s = event_log_stats();
    assert_true(s.bucket_ns > 0);
    last = last_t();
    for (int i = 200; i < 210; i++)
        push(10 * i, 1, 100 + (uint64_t)i, 0);
    size_t n;
    struct record_event *r = kept(&n);
    from = event_log_fresh_from(s.recorded, last);
    assert_true(from < n);
    for (size_t i = 0; i < n; i++)
        assert_true(i < from ? r[i].t_ns <= last : r[i].t_ns > last);
    free(r);
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &pages, &resident), 2);
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The largest cap costs nothing until rows arrive; rows cost their size. */
static void memory_follows_the_rows_not_the_cap(void **state)
{
    (void)state;
    start(1u << 28); /* 8 GiB of rows if it were populated up front */
    room = 200010; /* the model's own memory, touched before measuring */
    pushed = malloc(room * sizeof *pushed);
    assert_non_null(pushed);
    memset(pushed, 0, room * sizeof *pushed);
    long before = rss_kib();
    for (int i = 0; i < 10; i++)
        push(i, 1, (uint64_t)i, 0);
    long after_few = rss_kib();
    for (int i = 0; i < 200000; i++) /* 6 MiB of rows */
        push(10 + i, 1, (uint64_t)i, 0);
    long after_many = rss_kib();
    printf("RSS +%ld KiB after 10 rows, +%ld KiB after 200010\n",
           after_few - before, after_many - before);
    assert_true(after_few - before < 2048);
    assert_true(after_many - before < 8192); /* 6.1 MiB of rows */
    size_t n;
    struct record_event *r = kept(&n);
    assert_int_equal(n, 200010);
    assert_rows_are_events(r, n);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(periodic_pairs_keep_allocs_and_frees),
        cmocka_unit_test(random_walk_keeps_exact_extrema),
        cmocka_unit_test(below_the_cap_everything_is_kept),
        cmocka_unit_test(memory_follows_the_rows_not_the_cap),
        cmocka_unit_test(rows_take_the_callers_time_in_order),
        cmocka_unit_test(fresh_rows_are_those_pushed_since),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    event_log_reset();
    free(pushed);
    return rc;
}
