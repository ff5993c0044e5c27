/* test_cli_frames.c - frame names, demangling and call-site grouping
 * (src/cli/model/frames.c): the identity that diff matches across runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frames.h"

static void test_demangle(void **state)
{
    (void)state;
    char *d = frames_demangle(
        "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvimP11CUstream_st");
    assert_non_null(d);
    assert_string_equal(d, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::"
                           "malloc(void**, int, unsigned long, CUstream_st*)");
    free(d);
    d = frames_demangle("_Z10train_stepP5Modeli");
    assert_string_equal(d, "train_step(Model*, int)");
    free(d);
    /* C names and garbage are left to the caller. */
    assert_null(frames_demangle("cudaMalloc"));
    assert_null(frames_demangle("main"));
    assert_null(frames_demangle("_Znot a symbol"));
    assert_null(frames_demangle(NULL));
}

static void test_names(void **state)
{
    (void)state;
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    uint32_t a = frames_native(&ctx, "libtorch_cpu.so", 0x1f2a3b0, "_ZN2at5emptyEv");
    uint32_t b = frames_native(&ctx, "libtorch_cpu.so", 0x1f2a4c0, "_ZN2at5emptyEv");
    uint32_t c = frames_native(&ctx, "libtorch_python.so", 0x4a1f20, NULL);
    uint32_t p = frames_python(&ctx, "/home/alice/proj/model.py", 142, "forward");
    uint32_t q = frames_python(&ctx, "model.py", -1, "forward");
    uint32_t m = frames_marker(&ctx, "python frames unavailable: GIL not held");
    assert_string_equal(ctx.frames[a].name, "libtorch_cpu.so!at::empty()");
    /* Same function, other call offset: one frame (matches across rebuilds). */
    assert_int_equal(a, b);
    assert_true(ctx.frames[a].named);
    assert_string_equal(ctx.frames[c].name, "libtorch_python.so+0x4a1f20");
    assert_false(ctx.frames[c].named);
    assert_string_equal(ctx.frames[p].name, "/home/alice/proj/model.py:142:forward");
    assert_string_equal(ctx.frames[p].display, "model.py:142:forward");
    assert_string_equal(ctx.frames[p].module, "/home/alice/proj/model.py");
    assert_string_equal(ctx.frames[q].name, "model.py:forward");
    assert_string_equal(ctx.frames[m].name, "[python frames unavailable: GIL not held]");
    assert_int_equal(ctx.frames[m].type, FRAME_MARKER);
    /* Interned: the same frame again is the same index, no new entry. */
    size_t before = ctx.nframes;
    assert_int_equal(frames_python(&ctx, "/home/alice/proj/model.py", 142, "forward"), p);
    assert_int_equal(ctx.nframes, before);
    snapshot_ctx_free(&ctx);
}

/* Builds a snapshot with the given stacks (frames innermost first). */
static void add_stack(struct snapshot *s, int64_t id, const char *entry,
                      const uint32_t *frames, uint32_t n)
{
    snapshot_vec_reserve((void **)&s->stacks, &s->stacks_cap, sizeof *s->stacks,
                         s->nstacks + 1);
    struct snap_stack *st = &s->stacks[s->nstacks++];
    memset(st, 0, sizeof *st);
    st->id = id;
    st->entry = snapshot_intern(s->ctx, entry, strlen(entry));
    st->frames = arena_alloc(&s->ctx->arena, n * sizeof *frames);
    if (n > 0)
        memcpy(st->frames, frames, n * sizeof *frames);
    st->nframes = n;
    for (int b = 0; b < BY_COUNT; b++)
        st->site[b] = FRAMES_NONE;
}

static void test_sites_across_rebuild(void **state)
{
    (void)state;
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot base, new;
    memset(&base, 0, sizeof base);
    memset(&new, 0, sizeof new);
    base.ctx = new.ctx = &ctx;
    const char *alloc = "_ZN3c104cuda20CUDACachingAllocator6Native22NativeCachingAllocator6mallocEPPvimP11CUstream_st";
    /* BASE: allocator, a stripped glue frame, two Python frames. */
    uint32_t f1[] = {frames_native(&ctx, "libc10_cuda.so", 0x3a1f0, alloc),
                     frames_native(&ctx, "libtorch_python.so", 0x4a1f20, NULL),
                     frames_python(&ctx, "/p/model.py", 142, "forward"),
                     frames_python(&ctx, "/p/train.py", 120, "main")};
    add_stack(&base, 1, "cudaMalloc", f1, 4);
    /* NEW, rebuilt: every offset moved, ids renumbered. */
    uint32_t f2[] = {frames_native(&ctx, "libc10_cuda.so", 0x3b1f0, alloc),
                     frames_native(&ctx, "libtorch_python.so", 0x4b1f20, NULL),
                     frames_python(&ctx, "/p/model.py", 142, "forward"),
                     frames_python(&ctx, "/p/train.py", 120, "main")};
    add_stack(&new, 7, "cudaMalloc", f2, 4);
    /* Another call path into the same function. */
    uint32_t f3[] = {frames_native(&ctx, "libc10_cuda.so", 0x3b1f0, alloc),
                     frames_python(&ctx, "/p/model.py", 142, "forward"),
                     frames_python(&ctx, "/p/eval.py", 30, "main")};
    add_stack(&new, 8, "cudaMalloc", f3, 3);

    uint32_t sb = frames_site(&base, 0, BY_STACK), sn = frames_site(&new, 0, BY_STACK);
    assert_int_equal(sb, sn); /* the stripped frame's offset is left out */
    assert_int_not_equal(frames_site(&new, 1, BY_STACK), sn);
    assert_string_equal(frames_site_get(&ctx, BY_STACK, sb)->display, "model.py:142:forward");

    /* --by function: the innermost Python frame, for both paths. */
    assert_int_equal(frames_site(&new, 1, BY_FUNCTION), frames_site(&base, 0, BY_FUNCTION));
    assert_string_equal(frames_site_get(&ctx, BY_FUNCTION, frames_site(&new, 1, BY_FUNCTION))->label,
                        "/p/model.py:142:forward");
    /* --by module: the innermost frame's module. */
    uint32_t mod = frames_site(&new, 1, BY_MODULE);
    assert_string_equal(frames_site_get(&ctx, BY_MODULE, mod)->label, "libc10_cuda.so");
    assert_int_equal(frames_site(&base, 0, BY_MODULE), mod);
    /* Ungrouped groups share one site. */
    assert_int_equal(frames_site(&base, SNAP_NO_STACK, BY_STACK),
                     frames_site(&new, SNAP_NO_STACK, BY_STACK));
    snapshot_free(&base);
    snapshot_free(&new);
    snapshot_ctx_free(&ctx);
}

static void test_native_only_stack(void **state)
{
    (void)state;
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot s;
    memset(&s, 0, sizeof s);
    s.ctx = &ctx;
    /* llama.cpp-like: no Python; the innermost named frame labels it. */
    uint32_t f[] = {frames_native(&ctx, "libggml-cuda.so", 0x100, NULL),
                    frames_native(&ctx, "libggml-cuda.so", 0x200, "ggml_cuda_pool_alloc"),
                    frames_native(&ctx, "llama-cli", 0x300, "main")};
    add_stack(&s, 1, "cudaMalloc", f, 3);
    assert_int_equal(frames_label_pos(&ctx, &s.stacks[0]), 1);
    assert_string_equal(frames_group_label(&s, 0, BY_FUNCTION),
                        "libggml-cuda.so!ggml_cuda_pool_alloc");
    /* Only unnamed frames: the innermost one, offsets and all. */
    uint32_t g[] = {frames_native(&ctx, "a.out", 0x10, NULL),
                    frames_native(&ctx, "a.out", 0x20, NULL)};
    add_stack(&s, 2, "cuMemAlloc_v2", g, 2);
    assert_string_equal(frames_group_label(&s, 1, BY_FUNCTION), "a.out+0x10");
    /* No frames at all: the entry point. */
    add_stack(&s, 3, "cudaMallocAsync", NULL, 0);
    assert_string_equal(frames_group_label(&s, 2, BY_STACK), "cudaMallocAsync");
    snapshot_free(&s);
    snapshot_ctx_free(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demangle),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_sites_across_rebuild),
        cmocka_unit_test(test_native_only_stack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
