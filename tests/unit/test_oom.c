/* test_oom.c - the out-of-memory post-mortem's decisions (oom.c, with the
 * ledger oom_ledger.c and the caching allocator's figures allocator.c): the
 * cause each constructed device state gets, when the post-mortem is written,
 * rewritten or removed, the budget of CUMEMTRACE_MAX_OOM_DUMPS, and the exact
 * sentences on stderr.  The device (cuMemGetInfo), the tracker's figures, the
 * writer and the log are this file's stand-ins, so each state is exact.
 *
 * Order: oom.c remembers for the process that a chain recovered (later first
 * failures wait for their retry), so the tests that need a post-mortem
 * written at the first failure run before the first recovery. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "config.h"
#include "torch_protocol.h"
#include "dump_guard.h"
#include "log.h"
#include "oom.h"
#include "oom_ledger.h"
#include "output.h"
#include "phases.h"
#include "resolve.h"
#include "snapshot_write.h"

#define GiB (UINT64_C(1) << 30)
#define MiB (UINT64_C(1) << 20)

/* ---- the device and the tracker, as each test sets them ---- */

static struct {
    uint64_t free, total; /* what cuMemGetInfo answers */
    uint64_t tracked;     /* record_current */
    uint64_t limit;       /* record_limit (CUMEMTRACE_LIMIT) */
} dev;

static CUresult fake_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = dev.free;
    *total_bytes = dev.total;
    return CUDA_SUCCESS;
}

void *resolve_reals[SLOT_COUNT];

void *resolve_slow(enum resolve_slot slot)
{
    return resolve_reals[slot];
}

uint64_t record_current(int pool)
{
    return pool >= 0 ? dev.tracked : 0;
}

uint64_t record_limit(int device)
{
    (void)device;
    return dev.limit;
}

void record_pool_kinds(int pool, uint64_t out[KIND_COUNT])
{
    memset(out, 0, KIND_COUNT * sizeof out[0]);
    out[KIND_DEVICE] = record_current(pool);
}

void record_meminfo(int device, uint64_t free_bytes, uint64_t total_bytes)
{
    (void)device, (void)free_bytes, (void)total_bytes;
}

/* ---- the rest of the library ---- */

struct config config;
struct output_process output_process;
/* no TSC: a piece no tick falls in (clock.h: never NULL), so every reading
 * is clock_slow_ns's */
static const struct clock_tsc no_tsc;
const struct clock_tsc *clock_newest = &no_tsc;

int64_t clock_slow_ns(void)
{
    return 0;
}

void dump_guard_enter(struct dump_guard *g)
{
    (void)g;
}

void dump_guard_leave(struct dump_guard *g)
{
    (void)g;
}

/* What was said: every log_msg line, formatted. */
enum log_level log_threshold = LOG_DEBUG;
static char said[16][1024];
static int nsaid;

void log_msg(enum log_level level, const char *fmt, ...)
{
    (void)level;
    if (nsaid == 16)
        fail_msg("more than 16 lines logged");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(said[nsaid++], sizeof said[0], fmt, ap);
    va_end(ap);
}

/* What was written: each snapshot_write, with the chain as it was given. */
static struct {
    char path[64];       /* the file it named ("" for a rewrite) */
    bool rewrite;        /* called with the existing file's path */
    struct oom_info oom; /* the chain it was to state */
} writes[8];
static int nwrites;
static char released[64]; /* the last snapshot_name_release */

int snapshot_write(const char *reason, const char *path, const struct oom_info *oom,
                   char *out_path, size_t out_len)
{
    assert_string_equal(reason, "oom");
    assert_non_null(oom);
    if (nwrites == 8)
        fail_msg("more than 8 snapshots written");
    writes[nwrites].rewrite = path != NULL;
    writes[nwrites].oom = *oom;
    snprintf(writes[nwrites].path, sizeof writes[nwrites].path, "%s",
             path != NULL ? path : "");
    if (path == NULL) {
        snprintf(writes[nwrites].path, sizeof writes[nwrites].path,
                 "/nonexistent/app.oom.%d.json", nwrites + 1);
        if (out_path != NULL)
            snprintf(out_path, out_len, "%s", writes[nwrites].path);
    }
    nwrites++;
    return 0;
}

void snapshot_name_release(const char *reason, const char *path)
{
    assert_string_equal(reason, "oom");
    snprintf(released, sizeof released, "%s", path);
}

/* ---- helpers ---- */

static int setup(void **state)
{
    (void)state;
    oom_thread_end();    /* the thread's chain from the last test */
    oom_atfork_child();  /* the budget, the post-mortems and the ledger */
    memset(&config, 0, sizeof config);
    config.max_oom_dumps = 16;
    output_process.rank = -1;
    resolve_reals[SLOT_cuMemGetInfo_v2] = (void *)fake_mem_get_info;
    memset(&dev, 0, sizeof dev);
    nsaid = nwrites = 0;
    released[0] = '\0';
    return 0;
}

/* The device as cuMemGetInfo states it, and what the tracker holds on it. */
static void device(uint64_t total, uint64_t free_bytes, uint64_t tracked)
{
    dev.total = total;
    dev.free = free_bytes;
    dev.tracked = tracked;
}

static void fail_malloc(uint64_t bytes, bool by_limit, int64_t now)
{
    oom_on_failure(SLOT_cudaMalloc, KIND_DEVICE, 0, bytes, by_limit, NULL, now);
}

/* Another allocation on the thread: the open chain gave up. */
static void other_allocation(int64_t now)
{
    oom_on_success(KIND_DEVICE, 0, 4096, now);
}

static void pid_prefix(char *buf, size_t n, const char *rest)
{
    snprintf(buf, n, "out of memory (pid %d): %s", (int)getpid(), rest);
}

static void check_said(int i, const char *want)
{
    assert_true(i < nsaid);
    assert_string_equal(said[i], want);
}

/* ---- causes and sentences, written at the first failure ---- */

/* free < request and what this process does not hold could not have
 * covered it: exhausted; the post-mortem at once, stderr when it gives up. */
static void exhausted_is_written_at_once_and_said_when_it_gives_up(void **state)
{
    (void)state;
    device(80 * GiB, 512 * MiB, 79 * GiB);
    fail_malloc(GiB, false, 1000);
    assert_int_equal(nwrites, 1);
    assert_false(writes[0].rewrite);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_EXHAUSTED);
    assert_int_equal(writes[0].oom.shortfall, 512 * MiB);
    assert_int_equal(writes[0].oom.untracked, 512 * MiB);
    assert_int_equal(writes[0].oom.attempts, 1);
    assert_int_equal(nsaid, 0); /* a retry may still recover */

    other_allocation(2000);
    assert_int_equal(nwrites, 1); /* nothing the file states changed */
    assert_int_equal(nsaid, 3);
    char want[256];
    pid_prefix(want, sizeof want, "cudaMalloc of 1.00 GiB on GPU 0 failed (exhausted)");
    check_said(0, want);
    check_said(1, "  GPU 0: total 80.0 GiB, free 512 MiB, this process 79.0 GiB, "
                  "untracked 512 MiB");
    check_said(2, "  post-mortem: /nonexistent/app.oom.1.json (read it with: cumemtrace "
                  "report /nonexistent/app.oom.1.json)");

    struct oom_summary s;
    oom_ledger_summary(&s);
    assert_int_equal(s.count, 1);
    assert_int_equal(s.failed_attempts, 1);
    assert_int_equal(s.recovered, 0);
    assert_int_equal(s.ndumps, 1);
    assert_string_equal(s.dumps[0], "/nonexistent/app.oom.1.json");
}

/* Memory held outside this process would have covered the request, beyond
 * the 1 GiB a context and library workspaces explain: other processes. */
static void memory_held_elsewhere_is_other_processes(void **state)
{
    (void)state;
    device(80 * GiB, 256 * MiB, 10 * GiB);
    fail_malloc(GiB, false, 1000);
    assert_int_equal(nwrites, 1);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_OTHER_PROCESSES);
    assert_int_equal(writes[0].oom.shortfall, 768 * MiB);

    /* 1 GiB + the shortfall outside it is still what a context takes */
    setup(NULL);
    device(80 * GiB, 256 * MiB, 80 * GiB - 256 * MiB - (GiB + 768 * MiB));
    fail_malloc(GiB, false, 1000);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_EXHAUSTED);
}

static void refused_with_enough_free_is_refused_while_free(void **state)
{
    (void)state;
    device(80 * GiB, 40 * GiB, 39 * GiB);
    fail_malloc(GiB, false, 1000);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_REFUSED_WHILE_FREE);
    assert_int_equal(writes[0].oom.shortfall, 0);
    other_allocation(2000);
    char want[256];
    pid_prefix(want, sizeof want,
               "cudaMalloc of 1.00 GiB on GPU 0 failed (refused_while_free)");
    check_said(0, want);

    /* exactly the request free is enough */
    setup(NULL);
    device(80 * GiB, GiB, 79 * GiB);
    fail_malloc(GiB, false, 1000);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_REFUSED_WHILE_FREE);
}

/* CUMEMTRACE_LIMIT refused it: the cause and a line that names the limit. */
static void limit_refusal_says_the_limit(void **state)
{
    (void)state;
    device(80 * GiB, 70 * GiB, 7 * GiB + 512 * MiB);
    dev.limit = 8 * GiB;
    output_process.rank = 3;
    fail_malloc(GiB, true, 1000);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_LIMIT);
    assert_int_equal(writes[0].oom.shortfall, 512 * MiB);
    assert_int_equal(writes[0].oom.limit, 8 * GiB);
    other_allocation(2000);
    assert_int_equal(nsaid, 4);
    char want[256];
    snprintf(want, sizeof want,
             "out of memory (pid %d, rank 3): cudaMalloc of 1.00 GiB on GPU 0 failed (limit)",
             (int)getpid());
    check_said(0, want);
    check_said(2, "  refused by CUMEMTRACE_LIMIT=8.00 GiB: this process holds 7.50 GiB");
}

/* Host-pinned memory has no device: "host", and no GPU line. */
static void host_pinned_has_no_gpu_line(void **state)
{
    (void)state;
    dev.total = 80 * GiB;
    oom_on_failure(SLOT_cudaMalloc, KIND_HOST_PINNED, 2, 3 * MiB, false, NULL, 1000);
    assert_int_equal(writes[0].oom.device, -1);
    assert_int_equal(writes[0].oom.total_bytes, -1);
    other_allocation(2000);
    assert_int_equal(nsaid, 2);
    char want[256];
    pid_prefix(want, sizeof want, "cudaMalloc of 3.00 MiB on host 0 failed (exhausted)");
    check_said(0, want);
}

/* PyTorch refused by its own cap, no CUDA call failed: said at once. */
static void allocator_refusal_is_said_at_once(void **state)
{
    (void)state;
    device(80 * GiB, 48 * GiB, 30 * GiB);
    struct cumemtrace_allocator_facts in;
    memset(&in, 0xff, sizeof in); /* every figure -1: unknown */
    in.size = sizeof in;
    in.name = "pytorch";
    in.version = "2.15.0";
    in.config = "";
    in.top_tensors = NULL;
    in.optimizers = NULL;
    in.ntop_tensors = -1;
    in.requested_bytes = (int64_t)(2 * GiB);
    in.reserved_bytes = (int64_t)(30 * GiB);
    in.allocated_bytes = (int64_t)(29 * GiB);
    in.limit_bytes = (int64_t)(31 * GiB);
    assert_int_equal(cumemtrace_allocator_oom(0, &in), 0);
    assert_int_equal(nwrites, 1);
    assert_true(writes[0].oom.by_allocator);
    assert_true(writes[0].oom.has_allocator);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_ALLOCATOR_LIMIT);
    assert_int_equal(writes[0].oom.shortfall, GiB); /* reserved + request - cap */
    char want[256];
    pid_prefix(want, sizeof want, "PyTorch refused 2.00 GiB on GPU 0 by itself, without a "
                                  "CUDA call (allocator_limit)");
    check_said(0, want);

    /* a refusal whose figures do not decide it: the allocator's, no more */
    setup(NULL);
    in.limit_bytes = -1;
    in.name = "mine";
    assert_int_equal(cumemtrace_allocator_oom(0, &in), 0);
    assert_int_equal(writes[0].oom.cause, FORMAT_CAUSE_ALLOCATOR);
    pid_prefix(want, sizeof want, "mine refused 2.00 GiB on GPU 0 by itself, without a "
                                  "CUDA call (allocator)");
    check_said(0, want);
}

/* CUMEMTRACE_MAX_OOM_DUMPS: the rest counted, one line when it runs out,
 * and one at exit with how many. */
static void budget_counts_the_rest(void **state)
{
    (void)state;
    config.max_oom_dumps = 1;
    device(80 * GiB, 0, 79 * GiB);
    fail_malloc(GiB, false, 1000);
    fail_malloc(2 * GiB, false, 2000); /* chain 1 gave up: said */
    fail_malloc(3 * GiB, false, 3000);
    assert_int_equal(nwrites, 1);
    assert_int_equal(nsaid, 4);
    check_said(3, "out of memory again: cudaMalloc of 2.00 GiB failed (exhausted); "
                  "CUMEMTRACE_MAX_OOM_DUMPS=1 post-mortems are written, so further "
                  "failures are only counted (ooms in the exit snapshot); raise it to "
                  "see each one");
    oom_at_exit(4000);
    assert_int_equal(nsaid, 5);
    check_said(4, "2 more out-of-memory failures were counted but not written or "
                  "printed (CUMEMTRACE_MAX_OOM_DUMPS=1); the exit snapshot counts them "
                  "in ooms.suppressed");
    struct oom_summary s;
    oom_ledger_summary(&s);
    assert_int_equal(s.count, 3);
    assert_int_equal(s.suppressed, 2);
}

/* A retry loop that goes on: the file is rewritten when its cause changes
 * (after 100 ms) and at least once a second while attempts pile up. */
static void retries_rewrite_the_file_at_most_as_often_as_they_matter(void **state)
{
    (void)state;
    device(80 * GiB, 0, 79 * GiB);
    fail_malloc(GiB, false, 0);
    fail_malloc(GiB, false, 50000000); /* 50 ms: only in memory */
    assert_int_equal(nwrites, 1);
    dev.free = 2 * GiB; /* the cause becomes refused_while_free */
    fail_malloc(GiB, false, 90000000);
    assert_int_equal(nwrites, 1); /* material, but within 100 ms */
    fail_malloc(GiB, false, 150000000);
    assert_int_equal(nwrites, 2);
    assert_true(writes[1].rewrite);
    assert_string_equal(writes[1].path, "/nonexistent/app.oom.1.json");
    assert_int_equal(writes[1].oom.attempts, 4);
    assert_int_equal(writes[1].oom.cause, FORMAT_CAUSE_REFUSED_WHILE_FREE);
    fail_malloc(GiB, false, 900000000);
    assert_int_equal(nwrites, 2); /* attempts only, within a second */
    fail_malloc(GiB, false, 1200000000);
    assert_int_equal(nwrites, 3);
    assert_int_equal(writes[2].oom.attempts, 6);
}

/* ---- a recovered chain (from here on the process is known to retry) ---- */

static void recovered_chain_removes_its_post_mortem(void **state)
{
    (void)state;
    device(80 * GiB, 0, 79 * GiB);
    fail_malloc(GiB, false, 1000);
    oom_on_free(256 * MiB, 7);
    oom_on_free(256 * MiB, 7);
    fail_malloc(GiB, false, 2000);
    oom_on_success(KIND_DEVICE, 0, GiB, 3000);
    assert_int_equal(nwrites, 1);
    assert_string_equal(released, "/nonexistent/app.oom.1.json");
    assert_int_equal(nsaid, 1);
    check_said(0, "recovered: cudaMalloc of 1.00 GiB succeeded on attempt 3 after the "
                  "application released 512 MiB (routine for a caching allocator: no "
                  "post-mortem kept; CUMEMTRACE_OOM_DUMPS=all keeps them)");
    struct oom_summary s;
    oom_ledger_summary(&s);
    assert_int_equal(s.recovered, 1);
    assert_int_equal(s.retry_released_bytes, 512 * MiB);
    assert_int_equal(s.ndumps, 0);
    assert_int_equal(s.nattempts, 3);
    assert_int_equal(s.attempts[2].attempt, 3);
    assert_true(s.attempts[2].recovered);
}

/* Once the process has shown it retries, a first failure only registers its
 * post-mortem: written at the next failed attempt, never if it recovers. */
static void after_a_recovery_the_first_failure_waits(void **state)
{
    (void)state;
    device(80 * GiB, 0, 79 * GiB);
    fail_malloc(GiB, false, 1000);
    assert_int_equal(nwrites, 0);
    oom_on_success(KIND_DEVICE, 0, GiB, 2000);
    assert_int_equal(nwrites, 0);
    assert_string_equal(released, ""); /* no file, no number to give back */

    fail_malloc(2 * GiB, false, 3000);
    assert_int_equal(nwrites, 0);
    fail_malloc(2 * GiB, false, 4000);
    assert_int_equal(nwrites, 1);
    assert_false(writes[0].rewrite);
    assert_int_equal(writes[0].oom.attempts, 2);
    other_allocation(5000);
    char want[256];
    pid_prefix(want, sizeof want, "cudaMalloc of 2.00 GiB on GPU 0 failed (exhausted)");
    check_said(1, want); /* after the recovery note of the first chain */
}

/* A chain still waiting at exit is written then, and said with its file. */
static void a_waiting_chain_is_written_and_said_at_exit(void **state)
{
    (void)state;
    device(80 * GiB, 0, 79 * GiB);
    fail_malloc(GiB, false, 1000);
    assert_int_equal(nwrites, 0);
    oom_at_exit(2000);
    assert_int_equal(nwrites, 1);
    assert_int_equal(nsaid, 3);
    check_said(2, "  post-mortem: /nonexistent/app.oom.1.json (read it with: cumemtrace "
                  "report /nonexistent/app.oom.1.json)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(exhausted_is_written_at_once_and_said_when_it_gives_up, setup),
        cmocka_unit_test_setup(memory_held_elsewhere_is_other_processes, setup),
        cmocka_unit_test_setup(refused_with_enough_free_is_refused_while_free, setup),
        cmocka_unit_test_setup(limit_refusal_says_the_limit, setup),
        cmocka_unit_test_setup(host_pinned_has_no_gpu_line, setup),
        cmocka_unit_test_setup(allocator_refusal_is_said_at_once, setup),
        cmocka_unit_test_setup(budget_counts_the_rest, setup),
        cmocka_unit_test_setup(retries_rewrite_the_file_at_most_as_often_as_they_matter,
                               setup),
        cmocka_unit_test_setup(recovered_chain_removes_its_post_mortem, setup),
        cmocka_unit_test_setup(after_a_recovery_the_first_failure_waits, setup),
        cmocka_unit_test_setup(a_waiting_chain_is_written_and_said_at_exit, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
