/* test_serialise.c - the serialiser (serialise.c, with serialise_stacks.c,
 * serialise_phases.c and snapshot_json.c) over a tracker state built here:
 * the document it writes is one the CLI's reader accepts (all of the checks
 * `cumemtrace report` makes, snapshot_check.c among them), and states the
 * tracker's totals - per device and kind, the host's, the sites at the peak,
 * the stacks, the event rows - and a post-mortem's request and cause; a
 * write error is returned with its errno.  The reader is reached through
 * serialise_read.c (the two sides' headers both name the kinds KIND_*). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "oom_ledger.h"
#include "output.h"
#include "python.h"
#include "record.h"
#include "record_fixture.h"
#include "resolve.h"
#include "serialise.h"
#include "serialise_read.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* ---- what the serialiser's objects link against ---- */

struct config config = {.depth = 8, .event_cap = 1024, .python = true, .native = true};
struct output_process output_process = {.exe = "app", .host = "node7", .rank = -1,
                                        .local_rank = -1, .world_size = -1};
void *resolve_reals[SLOT_COUNT];

void *resolve_slow(enum resolve_slot slot)
{
    (void)slot;
    return NULL; /* no driver: the dump states no device's total */
}

/* The stacks here hold native frames only. */
enum python_frame_kind python_frame_decode(const void *frame, struct python_frame *out)
{
    (void)frame, (void)out;
    fail_msg("a native-only stack was decoded as Python");
    abort();
}

/* ---- helpers ---- */

static struct record_stack *stack_n(unsigned n)
{
    void *frames[2] = {(void *)(uintptr_t)(0x1000 + n), (void *)(uintptr_t)0x2000};
    return record_stack_intern(SLOT_cudaMalloc, frames, 2);
}

/* The document serialise_state writes for doc, NUL-terminated (free it). */
static char *serialised(const struct serialise_doc *doc, struct serialise_said *said,
                        size_t *len)
{
    int fd = memfd_create("snapshot", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(serialise_state(fd, doc, NULL, said), 0);
    off_t n = lseek(fd, 0, SEEK_END);
    assert_true(n > 0);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
    buf[n] = '\0';
    close(fd);
    *len = (size_t)n;
    return buf;
}

static void read_back(const struct serialise_doc *doc, struct serialise_said *said,
                      struct read_totals *t)
{
    size_t len;
    char *buf = serialised(doc, said, &len);
    char err[512] = "";
    int rc = serialise_read(buf, len, t, err, sizeof err);
    if (rc != 0)
        fail_msg("the reader refused the document: %s", err);
    free(buf);
}

/* ---- the state: two devices, two kinds, host memory, a free ----
 * device 0: 1 MiB (A) + 3 MiB (B) device memory, 2 MiB (A) managed, then
 * B's 3 MiB freed: current 3 MiB, peak 6 MiB at the managed allocation.
 * device 1: 5 MiB (B).  host-pinned: 7 MiB (A). */
static void state_reads_back_with_its_totals(void **state)
{
    (void)state;
    struct record_stack *a = stack_n(1), *b = stack_n(2);
    alloc(0x100000, 1 * MiB, KIND_DEVICE, 0, a, 10);
    alloc(0x200000, 3 * MiB, KIND_DEVICE, 0, b, 20);
    alloc(0x300000, 2 * MiB, KIND_MANAGED, 0, a, 30);
    release(0x200000, 40);
    alloc(0x400000, 5 * MiB, KIND_DEVICE, 1, b, 50);
    alloc(0x500000, 7 * MiB, KIND_HOST_PINNED, 0, a, 60);

    struct serialise_doc doc = {.reason = "exit", .sequence = 3};
    struct serialise_said said;
    struct read_totals t;
    read_back(&doc, &said, &t);

    assert_string_equal(t.reason, "exit");
    assert_int_equal(t.sequence, 3);
    assert_int_equal(said.peak_device, 0);
    assert_int_equal(said.peak_bytes, 6 * MiB);

    assert_int_equal(t.ndevices, 2);
    const struct read_device *d0 = &t.dev[0], *d1 = &t.dev[1];
    assert_int_equal(d0->ordinal, 0);
    assert_int_equal(d0->current, 3 * MiB);
    assert_int_equal(d0->peak, 6 * MiB);
    assert_int_equal(d0->at_peak_bytes, 6 * MiB); /* the sites at the peak sum to it */
    assert_int_equal(d0->live_bytes, 3 * MiB);
    assert_int_equal(d0->live_count, 2);
    assert_int_equal(d0->nlive, 2); /* stack A's device and managed sites */
    assert_int_equal(d0->kind_current[KIND_DEVICE], 1 * MiB);
    assert_int_equal(d0->kind_peak[KIND_DEVICE], 4 * MiB);
    assert_int_equal(d0->kind_allocs[KIND_DEVICE], 2);
    assert_int_equal(d0->kind_frees[KIND_DEVICE], 1);
    assert_int_equal(d0->kind_current[KIND_MANAGED], 2 * MiB);
    assert_int_equal(d0->kind_allocs[KIND_MANAGED], 1);
    assert_int_equal(d1->ordinal, 1);
    assert_int_equal(d1->current, 5 * MiB);
    assert_int_equal(d1->peak, 5 * MiB);
    assert_int_equal(d1->live_bytes, 5 * MiB);
    assert_int_equal(t.host_current, 7 * MiB);
    assert_int_equal(t.host_peak, 7 * MiB);

    assert_int_equal(t.nstacks, 2);
    assert_int_equal(t.stack_ids[0], a->id);
    assert_int_equal(t.stack_ids[1], b->id);
    assert_string_equal(t.entry[0], "cudaMalloc");
    assert_int_equal(t.events, 6); /* five allocations and a free */
    assert_false(t.oom_present);
}

/* A post-mortem: the failing request, its cause and shortfall, and the
 * process's count of failures from the ledger. */
static void post_mortem_states_its_request(void **state)
{
    (void)state;
    struct oom_info o;
    memset(&o, 0, sizeof o);
    o.requested = 2 * GiB;
    o.kind = KIND_DEVICE;
    o.device = 1;
    o.slot = SLOT_cudaMalloc;
    o.tid = 42;
    o.time_ns = 70;
    o.free_bytes = (int64_t)(512 * MiB);
    o.total_bytes = (int64_t)(16 * GiB);
    o.tracked = 5 * MiB;
    o.by_kind[KIND_DEVICE] = 5 * MiB;
    o.untracked = 16 * GiB - 512 * MiB - 5 * MiB;
    o.cause = FORMAT_CAUSE_OTHER_PROCESSES;
    o.shortfall = 2 * GiB - 512 * MiB;
    o.attempts = 2;
    o.chain = oom_ledger_new_chain();
    oom_ledger_failed(&o, 70);

    struct serialise_doc doc = {.reason = "oom", .sequence = 1, .oom = &o};
    struct read_totals t;
    read_back(&doc, NULL, &t);
    assert_string_equal(t.reason, "oom");
    assert_true(t.oom_present);
    assert_int_equal(t.oom_requested, 2 * GiB);
    assert_int_equal(t.oom_device, 1);
    assert_string_equal(t.oom_cause, "other_processes");
    assert_int_equal(t.oom_shortfall, 2 * GiB - 512 * MiB);
    assert_int_equal(t.oom_attempts, 2);
    assert_int_equal(t.ooms_count, 1);
    assert_int_equal(t.dev[1].current, 5 * MiB); /* the state is there too */
}

/* A full disk: -1 with write's errno, as snapshot_write reports it. */
static void write_error_is_returned(void **state)
{
    (void)state;
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        print_message("skipped: no /dev/full here to fail the writes\n");
        skip();
    }
    struct serialise_doc doc = {.reason = "exit"};
    errno = 0;
    assert_int_equal(serialise_state(fd, &doc, NULL, NULL), -1);
    assert_int_equal(errno, ENOSPC);
    close(fd);
}

int main(void)
{
    record_init(1024, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(state_reads_back_with_its_totals),
        cmocka_unit_test(post_mortem_states_its_request),
        cmocka_unit_test(write_error_is_returned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
