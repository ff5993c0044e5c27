/* hooks_common.c - the tracker calls every wrapper makes (see hooks.h). */
#include "hooks.h"

#include "clock.h"
#include "config.h"
#include "oom.h"
#include "python.h"
#include "unwind.h"

__thread int hooks_depth __attribute__((tls_model("initial-exec")));

int hooks_driver_device(void)
{
    PFN(cuCtxGetDevice) get = REAL(cuCtxGetDevice);
    CUdevice d;
    if (get != NULL && get(&d) == CUDA_SUCCESS && d >= 0)
        return d;
    return 0;
}

int hooks_runtime_device(void)
{
    PFN(cudaGetDevice) get = REAL(cudaGetDevice);
    int d;
    if (get != NULL && get(&d) == cudaSuccess && d >= 0)
        return d;
    return hooks_driver_device();
}

/* Native frames (unless CUMEMTRACE_NATIVE=0), with the thread's Python
 * frames merged in where CPython runs (python.c); CUMEMTRACE_DEPTH=0 records
 * no stack at all.  Without Python the merge costs one branch. */
static unsigned capture_frames(void **frames)
{
    unsigned n = 0;
    if (config.depth != 0) {
        if (config.native)
            n = unwind_capture(frames, config.depth);
        if (__builtin_expect(python_wanted(), 0))
            n = python_merge(frames, n, RECORD_MAX_DEPTH);
    }
    return n;
}

static struct record_stack *capture(unsigned slot)
{
    void *frames[RECORD_MAX_DEPTH];
    unsigned n = capture_frames(frames);
    return record_stack_intern(slot, frames, n);
}

bool hooks_alloc_begin(struct hook_alloc *c, bool runtime)
{
    c->reserved = false;
    c->runtime = runtime;
    c->traced = hook_enter();
    if (!c->traced)
        return true;
    if (c->kind == KIND_HOST_PINNED) {
        c->device = -1;
        return true;
    }
    if (c->device < 0)
        c->device = runtime ? hooks_runtime_device() : hooks_driver_device();
    if (!record_limit_reserve(c->device, c->requested)) {
        struct record_stack *st = capture(c->slot);
        record_failure(c->kind, c->device);
        oom_on_failure(c->slot, c->kind, c->device, c->requested, true, st,
                       clock_now_ns());
        hook_leave();
        return false;
    }
    c->reserved = true;
    return true;
}

void hooks_alloc_end(struct hook_alloc *c, bool ok, bool oom, uintptr_t addr,
                     uint64_t size, bool is_handle)
{
    if (!c->traced) {
        hook_leave();
        return;
    }
    if (ok) {
        int dev = c->device;
        if (c->kind == KIND_HOST_PINNED) /* owned by the context that made it */
            dev = c->runtime ? hooks_runtime_device() : hooks_driver_device();
        struct record_alloc a = {addr, size, c->requested, c->kind, dev,
                                 is_handle, (uint16_t)hooks_context_owner()};
        void *frames[RECORD_MAX_DEPTH];
        unsigned n = capture_frames(frames);
        int64_t now = clock_now_ns();
        record_alloc_at(&a, c->slot, frames, n, now);
        oom_on_success(c->kind, c->device, c->requested, now);
    } else if (oom) {
        struct record_stack *st = capture(c->slot);
        record_failure(c->kind, c->device);
        oom_on_failure(c->slot, c->kind, c->device, c->requested, false, st,
                       clock_now_ns());
    }
    if (c->reserved)
        record_limit_settle(c->device, c->requested);
    hook_leave();
}

void hooks_free_begin(struct hook_free *f, uintptr_t addr,
                      enum record_kind kind_hint)
{
    f->token = NULL;
    f->traced = hook_enter();
    if (f->traced && addr != 0)
        f->token = record_free_take(addr, kind_hint, clock_now_ns());
}

void hooks_free_end(struct hook_free *f, bool ok)
{
    if (f->token != NULL) {
        uint64_t size = record_token_size(f->token);
        uint32_t stack = record_token_stack(f->token);
        record_free_finish(f->token, ok, ok ? 0 : clock_now_ns());
        if (ok)
            oom_on_free(size, stack);
    }
    hook_leave();
}

void hooks_meminfo(int device, size_t *free_bytes, size_t *total_bytes)
{
    if (free_bytes != NULL && total_bytes != NULL)
        record_meminfo(device, *free_bytes, *total_bytes);
    uint64_t limit = record_limit(device);
    if (limit == 0)
        return;
    uint64_t used = record_current(device);
    uint64_t room = used >= limit ? 0 : limit - used;
    if (total_bytes != NULL && *total_bytes > limit)
        *total_bytes = (size_t)limit;
    if (free_bytes != NULL && *free_bytes > room)
        *free_bytes = (size_t)room;
}
