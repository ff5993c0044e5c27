/* test_cli_holders.c - the holders model (src/cli/model/holders.c) on the
 * golden inputs tensors_oom.json and tensors_exit.json
 * (tests/golden/gen_inputs.py): every group PyTorch's layer wrote is a
 * holder, named by the user's line however deep the library frames go; the
 * holders and `more` add up to PyTorch's allocated_bytes; the cache is its
 * own row; the driver's segments answer when asked; --focus and --hide
 * apply to the groups.  Run from the repository root (make test-unit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame_filter.h"
#include "holders.h"
#include "snapshot_read.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define INPUTS "tests/golden/inputs/"
#define MODEL "/home/alice/proj/model.py"
#define TRAIN "/home/alice/proj/train.py"

struct loaded {
    struct snapctx ctx;
    struct snapshot s;
};

static void load(struct loaded *l, const char *name)
{
    struct cli_error err;
    snapshot_ctx_init(&l->ctx);
    int rc = snapshot_read_file(&l->ctx, name, &l->s, &err);
    if (rc != 0)
        fail_msg("cannot read %s (run from the repository root): %s", name, err.msg);
}

static void unload(struct loaded *l)
{
    snapshot_free(&l->s);
    snapshot_ctx_free(&l->ctx);
}

static const struct holder *find(const struct holders *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->v[i].name, name) == 0)
            return &h->v[i];
    return NULL;
}

static void test_oom_holders_are_every_group_by_user_line(void **state)
{
    (void)state;
    struct loaded l;
    load(&l, INPUTS "tensors_oom.json");
    assert_true(holders_have_tensors(&l.s, NULL, HOLDERS_OOM));
    struct holders h;
    assert_int_equal(holders_get(&l.s, NULL, HOLDERS_OOM, false, &h), 0);
    assert_int_equal(h.source, HOLDERS_TENSORS);
    assert_int_equal(h.n, 8); /* all of them, not the first five */
    assert_true(h.bytes == l.s.oom.allocator.allocated_bytes);
    assert_true(h.total_bytes == l.s.oom.allocator.allocated_bytes);
    assert_false(h.has_more);
    /* largest first, by the user's line under the library's frames */
    assert_string_equal(h.v[0].name, MODEL ":142:forward");
    assert_string_equal(h.v[0].display, "model.py:142:forward");
    assert_true(h.v[0].bytes == 25 * GiB);
    for (size_t i = 1; i < h.n; i++)
        assert_true(h.v[i - 1].bytes >= h.v[i].bytes);
    /* Hugging Face's key/value cache, ten library frames deep */
    const struct holder *kv = find(&h, MODEL ":150:forward");
    assert_non_null(kv);
    assert_true(kv->bytes == 1200 * MiB && kv->count == 24);
    /* the whole stack is kept beneath the line */
    assert_true(kv->group->nrecorded == 14);
    /* autograd's thread: its node and forward line, apart from the blocks
     * of library code alone */
    const struct holder *bw = find(&h, "[backward of " MODEL ":142:forward, MmBackward0]");
    assert_non_null(bw);
    assert_true(bw->bytes == 300 * MiB);
    assert_string_equal(bw->display, "[backward of model.py:142:forward, MmBackward0]");
    const struct holder *lib = find(&h, "[no user frame]");
    assert_non_null(lib);
    assert_true(lib->bytes == 2 * MiB);
    /* the cache row */
    assert_true(h.has_cache);
    assert_true(h.cache_bytes == 512 * MiB && h.cache_segments == 6 &&
                h.cache_largest_free == 256 * MiB);
    holders_free(&h);

    /* the driver's view on request: which line created each segment */
    assert_int_equal(holders_get(&l.s, NULL, HOLDERS_OOM, true, &h), 0);
    assert_int_equal(h.source, HOLDERS_SEGMENTS);
    assert_int_equal(h.n, 3);
    assert_true(h.bytes == l.s.oom.tracked_bytes);
    assert_true(h.v[0].stack != SNAP_NO_STACK);
    holders_free(&h);
    unload(&l);
}

static void test_peak_exit_and_growth(void **state)
{
    (void)state;
    struct loaded l;
    load(&l, INPUTS "tensors_exit.json");
    const struct snap_device *d = &l.s.devices[0];
    struct holders h;
    assert_int_equal(holders_get(&l.s, d, HOLDERS_PEAK, false, &h), 0);
    assert_int_equal(h.source, HOLDERS_TENSORS);
    assert_int_equal(h.n, 8);
    assert_true(h.bytes == d->allocator.peak_allocated_bytes);
    assert_true(h.step == 11 && h.time_ns == 9000000000);
    holders_free(&h);

    assert_int_equal(holders_get(&l.s, d, HOLDERS_NOW, false, &h), 0);
    assert_int_equal(h.n, 4);
    assert_true(h.bytes == d->allocator.allocated_bytes);
    const struct holder *logits = find(&h, MODEL ":160:head");
    assert_non_null(logits);
    assert_true(logits->bytes == 12 * 196 * MiB);
    holders_free(&h);

    assert_int_equal(holders_growth(&l.s, d, &h), 0);
    assert_int_equal(h.n, 1);
    assert_string_equal(h.v[0].name, MODEL ":160:head");
    assert_true(h.v[0].group->bytes_per_step == 196 * MiB);
    assert_true(h.v[0].group->first_step == 1 && h.v[0].group->last_step == 12);
    holders_free(&h);

    /* no tensors at a moment: the driver's groups */
    assert_int_equal(holders_get(&l.s, d, HOLDERS_NOW, true, &h), 0);
    assert_int_equal(h.source, HOLDERS_SEGMENTS);
    assert_true(h.bytes == d->current_bytes);
    holders_free(&h);
    unload(&l);
}

/* The filters are the process's; these tests set them last. */
static void test_focus_drops_groups(void **state)
{
    (void)state;
    assert_int_equal(frame_filter_regex(true, "transformers/"), 0);
    struct loaded l;
    load(&l, INPUTS "tensors_oom.json");
    struct holders h;
    assert_int_equal(holders_get(&l.s, NULL, HOLDERS_OOM, false, &h), 0);
    assert_int_equal(h.n, 2); /* the attention and the key/value cache */
    assert_true(h.bytes == 6 * GiB + 1200 * MiB);
    assert_true(h.total_bytes == l.s.oom.allocator.allocated_bytes);
    holders_free(&h);
    unload(&l);
}

static void test_hide_moves_a_line_outward(void **state)
{
    (void)state;
    assert_int_equal(frame_filter_regex(false, "model\\.py"), 0);
    struct loaded l;
    load(&l, INPUTS "tensors_oom.json");
    struct holders h;
    assert_int_equal(holders_get(&l.s, NULL, HOLDERS_OOM, false, &h), 0);
    /* forward (142), attention (200 < 143) and the cache (150) are
     * train_step's now: one holder */
    const struct holder *step = find(&h, TRAIN ":88:train_step");
    assert_non_null(step);
    assert_true(step->bytes == 25 * GiB + 6 * GiB + 1200 * MiB);
    assert_null(find(&h, MODEL ":142:forward"));
    assert_true(h.bytes == l.s.oom.allocator.allocated_bytes);
    holders_free(&h);
    unload(&l);
    frame_filter_regex(false, "^$"); /* hides nothing from here on */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_holders_are_every_group_by_user_line),
        cmocka_unit_test(test_peak_exit_and_growth),
        cmocka_unit_test(test_hide_moves_a_line_outward),
        cmocka_unit_test(test_focus_drops_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
