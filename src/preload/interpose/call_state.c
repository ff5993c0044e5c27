/* call_state.c - the tracker calls every wrapper makes (see hooks.h),
 * and the end of a thread.
 *
 * Per-thread state: the tracker's spare entry, the OOM chain, and, while a
 * real call runs, the bytes reserved against CUMEMTRACE_LIMIT and the entry
 * taken out by a free.  A thread may end inside the real call (cancelled at
 * a cancellation point in the driver, pthread_exit from a signal handler):
 * the reservation would then be held for ever and later requests refused
 * with "this process holds 0 B".  So what is in flight lives in TLS, and
 * the destructor of a pthread key - run at every thread end, cancellation
 * included - settles it and frees the rest.  Cost: one TLS test per call;
 * pthread_setspecific once per thread.
 *
 * Signal handlers: the depth guard counts only a thread's outermost call,
 * but a handler that interrupts a traced call and allocates makes a new
 * outermost call, not a nested one - swallowed, its free would later count
 * as unknown.  `hooks_guard` (hooks.h) tells them apart for allocations and
 * frees:
 *  - `busy`: the thread is in our bookkeeping (it may hold the tracker's
 *    lock, be in the unwinder or in malloc).  A call arriving then can only
 *    come from a handler, and blocking could deadlock: it is passed through
 *    and counted, lock-free (record_count_reentrant).
 *  - `layer`: the outermost call is in its real call.  The runtime reaching
 *    the driver (a driver entry point under a runtime one) is the same
 *    allocation; any other arrival - a runtime entry point, or anything
 *    under a driver call (the driver calls no exported entry point) - is a
 *    handler's new call, traced in full: this thread holds none of our
 *    locks then.  What the interrupted call keeps in TLS is saved and put
 *    back when the handler's call ends.
 * Not told apart: a handler's driver-API call that interrupts a runtime
 * call's real call looks like the runtime reaching the driver.
 */
#include "hooks.h"

#include <pthread.h>

#include "clock.h"
#include "config.h"
#include "oom.h"
#include "phases.h"
#include "python.h"
#include "unwind.h"

/* hooks_thread is a member of thread_hot (thread/thread_hot.c). */
/* Set by start-up and the first CUDA call (init.c), read by every wrapper:
 * defined here, with the state the wrappers share, so that reading them
 * is no call up into start-up. */
int hooks_ready, hooks_touched;
volatile int hooks_dump_requested;
bool hooks_enabled;

/* In flight on this thread: a limit reservation (and, in hooks_thread, a
 * taken free entry). */
static __thread struct {
    bool reserved;
    int device;
    uint64_t bytes;
} inflight __attribute__((tls_model("initial-exec")));

static pthread_key_t thread_key;
static bool thread_key_made;

static void thread_end(void *unused)
{
    (void)unused;
    hooks_depth++; /* nothing below is a traced call */
    if (inflight.reserved)
        record_limit_settle(inflight.device, inflight.bytes);
    /* the real free may or may not have run; it was accounted as done */
    record_free_finish(hooks_inflight_token, true, 0);
    inflight.reserved = false;
    hooks_inflight_token = NULL;
    record_thread_end();
    oom_thread_end();
    /* A later destructor may call CUDA again: then register again. */
    hooks_thread_known = false;
    hooks_depth--;
}

void call_state_init(void)
{
    thread_key_made = pthread_key_create(&thread_key, thread_end) == 0;
    /* The limits are set once, before any wrapper runs (config.c). */
    for (int d = 0; d < RECORD_MAX_DEVICES; d++)
        if (record_limit(d) != 0)
            __atomic_or_fetch(&hooks_slow, HOOKS_SLOW_LIMIT, __ATOMIC_RELAXED);
}

void hooks_thread_start(void)
{
    /* the fast path takes the id as known (hooks_fast_alloc_done); a fork
     * child's tracker forgets it, and its `known` with it (init.c) */
    (void)record_current_tid();
    hooks_thread_known = true;
    if (thread_key_made)
        pthread_setspecific(thread_key, &thread_key); /* any non-NULL value */
}

/* The current device, cached per thread (see hooks.h).  A fill reads the
 * generation before asking the driver, so another thread's reset in
 * between leaves the filled value stale, never wrong; a switch on this
 * thread in between - a signal handler's - empties the entry, and the
 * fill, seeing the thread's epoch moved, empties it again after its
 * store. */
unsigned hooks_device_gen = 1;

void hooks_device_changed(bool every_thread)
{
    /* never 0, which marks an empty cache entry */
    if (every_thread && __atomic_add_fetch(&hooks_device_gen, 1, __ATOMIC_RELEASE) == 0)
        __atomic_add_fetch(&hooks_device_gen, 1, __ATOMIC_RELEASE);
    hooks_thread.device_epoch++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hooks_thread.device[0].gen = hooks_thread.device[1].gen = 0;
}

static int ask_driver(void)
{
    PFN(cuCtxGetDevice) get = REAL(cuCtxGetDevice);
    CUdevice d;
    if (get != NULL && get(&d) == CUDA_SUCCESS && d >= 0)
        return d;
    return -1;
}

static int ask_runtime(void)
{
    PFN(cudaGetDevice) get = REAL(cudaGetDevice);
    int d;
    if (get != NULL && get(&d) == cudaSuccess && d >= 0)
        return d;
    return ask_driver();
}

/* Layer 0: the driver's current context; 1: the runtime's current device.
 * A failed query is not cached (no context yet: the next call asks again).
 * The thread is in our bookkeeping meanwhile (a fast-path caller is not
 * marked busy yet). */
int hooks_device_fill(int layer)
{
    unsigned gen = __atomic_load_n(&hooks_device_gen, __ATOMIC_ACQUIRE);
    unsigned epoch = hooks_thread.device_epoch;
    struct hooks_device_cache *c = &hooks_thread.device[layer];
    if (c->gen == gen)
        return c->device;
    unsigned char busy = hooks_guard.busy;
    hooks_guard.busy = 1;
    int d = layer ? ask_runtime() : ask_driver();
    hooks_guard.busy = busy;
    if (d < 0)
        return 0;
    c->device = d; /* before gen: a handler's reading finds both */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    c->gen = gen;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (hooks_thread.device_epoch != epoch)
        c->gen = 0; /* switched while we asked: what we were told is stale */
    return d;
}

int hooks_driver_device(void)
{
    return hooks_device(0);
}

int hooks_runtime_device(void)
{
    return hooks_device(1);
}

/* Native frames (unless CUMEMTRACE_NATIVE=0), with the thread's Python
 * frames merged in where CPython runs (python.c); CUMEMTRACE_DEPTH=0 records
 * no stack at all.  Without Python the merge costs one branch. */
static inline unsigned capture_frames(void **frames, const void *from)
{
    unsigned n = 0;
    if (config.depth != 0) {
        if (config.native)
            n = unwind_capture(frames, config.depth, from);
        if (__builtin_expect(python_wanted(), 0))
            n = python_merge(frames, n, RECORD_MAX_DEPTH);
    }
    return n;
}

static struct record_stack *capture(unsigned slot, const void *from)
{
    void *frames[RECORD_MAX_DEPTH];
    unsigned n = capture_frames(frames, from);
    return record_stack_intern(slot, frames, n);
}

/* Enters an allocation or free call of `slot`: true when it is traced
 * (then hooks_guard.busy is set).  See "Signal handlers" at the top. */
static bool call_enter(unsigned slot, struct hook_outer *o)
{
    unsigned char layer = HOOKS_LAYER_OF(slot);
    o->fresh = false;
    if (hooks_depth != 0) {
        if (hooks_guard.busy) {
            record_count_reentrant();
            hooks_depth++;
            return false;
        }
        if (hooks_guard.layer == HOOKS_LAYER_NONE ||
            (hooks_guard.layer == HOOKS_LAYER_RUNTIME && layer == HOOKS_LAYER_DRIVER)) {
            hooks_depth++; /* the same call, one layer down */
            return false;
        }
        /* a handler's new call inside a real call: save what is ours */
        o->fresh = true;
        o->depth = hooks_depth;
        o->layer = hooks_guard.layer;
        o->reserved = inflight.reserved;
        o->device = inflight.device;
        o->bytes = inflight.bytes;
        o->token = hooks_inflight_token;
        inflight.reserved = false;
        hooks_inflight_token = NULL;
        hooks_depth = 1;
        if (!hooks_enabled)
            return false;
    } else if (!hook_enter()) {
        return false;
    }
    hooks_guard.layer = layer;
    hooks_guard.busy = 1;
    return true;
}

/* Leaves a call entered by call_enter; an untraced one leaves hooks_guard as
 * it was (it may have arrived in the bookkeeping of the call it interrupted). */
static void call_leave(const struct hook_outer *o, bool traced)
{
    if (traced)
        hooks_guard.busy = 0;
    if (!o->fresh) {
        if (hooks_depth == 1)
            hooks_guard.layer = HOOKS_LAYER_NONE;
        hook_leave();
        return;
    }
    hooks_depth = o->depth;
    hooks_guard.layer = o->layer;
    inflight.reserved = o->reserved;
    inflight.device = o->device;
    inflight.bytes = o->bytes;
    hooks_inflight_token = o->token;
}

/* A failed allocation (oom: the API's out-of-memory code; only those open
 * or extend a retry chain).  by_limit: refused by CUMEMTRACE_LIMIT. */
static void alloc_failed(unsigned slot, enum record_kind kind, int device,
                         uint64_t requested, bool by_limit, const void *frame)
{
    struct record_stack *st = capture(slot, frame);
    record_failure(kind, device);
    oom_on_failure(slot, kind, device, requested, by_limit, st, clock_now_ns());
}

/* A successful allocation; addr 0 is cudaMalloc(&p, 0), success with
 * nothing allocated.  `device` as hook_alloc.device. */
static inline __attribute__((always_inline)) void alloc_done(unsigned slot, enum record_kind kind, int device,
                              bool runtime, uintptr_t addr, uint64_t size,
                              uint64_t requested, bool is_handle, const void *frame)
{
    if (__builtin_expect(addr != 0, 1)) {
        int dev = device;
        if (FORMAT_KIND_ON_HOST(kind)) /* owned by the context that made it */
            dev = runtime ? hooks_runtime_device() : hooks_driver_device();
        struct record_alloc a = {addr, size, requested, kind, dev,
                                 is_handle, (uint16_t)hooks_context_owner_fast(), phase_now()};
        void *frames[RECORD_MAX_DEPTH];
        unsigned n = capture_frames(frames, frame);
        record_alloc_at(&a, slot, frames, n, clock_now_ns());
        if (__builtin_expect(a.ctx == RECORD_CONTEXT_OVERFLOW, 0))
            hooks_context_allocated(addr); /* after: its time bounds the entry's */
        if (__builtin_expect(__atomic_load_n(&python_mode, __ATOMIC_RELAXED) == PYTHON_ON, 0))
            python_arm_torch_layer();
    }
    if (__builtin_expect(oom_chain != NULL, 0))
        oom_on_success(kind, device, requested, clock_now_ns());
}

unsigned hooks_capture_frames(void **frames, const void *from)
{
    return capture_frames(frames, from);
}

int hooks_pinned_device(bool runtime)
{
    return runtime ? hooks_runtime_device() : hooks_driver_device();
}

void hooks_oom_success(enum record_kind kind, int device, uint64_t requested)
{
    oom_on_success(kind, device, requested, clock_now_ns());
}

void hooks_fast_alloc_failed(unsigned slot, enum record_kind kind, int device,
                             uint64_t size, bool oom, const void *frame)
{
    if (!oom)
        return;
    hooks_guard.busy = 1;
    alloc_failed(slot, kind, device, size, false, frame);
    hooks_guard.busy = 0;
}

bool hooks_alloc_begin(struct hook_alloc *c, bool runtime)
{
    c->reserved = false;
    c->runtime = runtime;
    c->traced = call_enter(c->slot, &c->outer);
    if (!c->traced)
        return true;
    if (FORMAT_KIND_ON_HOST(c->kind)) {
        c->device = -1;
        hooks_guard.busy = 0; /* the real call runs */
        return true;
    }
    if (c->device < 0)
        c->device = runtime ? hooks_runtime_device() : hooks_driver_device();
    if (!record_limit_reserve(c->device, c->requested)) {
        alloc_failed(c->slot, c->kind, c->device, c->requested, true, c->frame);
        call_leave(&c->outer, c->traced);
        return false;
    }
    c->reserved = true;
    inflight.device = c->device;
    inflight.bytes = c->requested;
    inflight.reserved = true;
    hooks_guard.busy = 0; /* the real call runs */
    return true;
}

void hooks_alloc_end(struct hook_alloc *c, bool ok, bool oom, uintptr_t addr,
                     uint64_t size, bool is_handle)
{
    if (!c->traced) {
        call_leave(&c->outer, c->traced);
        return;
    }
    hooks_guard.busy = 1;
    if (ok)
        alloc_done(c->slot, c->kind, c->device, c->runtime, addr, size, c->requested,
                   is_handle, c->frame);
    else if (oom)
        alloc_failed(c->slot, c->kind, c->device, c->requested, false, c->frame);
    if (c->reserved) {
        inflight.reserved = false;
        record_limit_settle(c->device, c->requested);
    }
    call_leave(&c->outer, c->traced);
}

void hooks_free_begin(struct hook_free *f, unsigned slot, uintptr_t addr,
                      enum record_kind kind_hint)
{
    f->token = NULL;
    f->guarded = true;
    f->traced = call_enter(slot, &f->outer);
    if (f->traced && addr != 0)
        hooks_inflight_token = f->token =
            record_free_take(addr, kind_hint, clock_now_ns());
    if (f->traced)
        hooks_guard.busy = 0; /* the real call runs */
}

/* The real free of a taken entry returned: give it back, or on failure put
 * it back; an open chain counts what the application released. */
static void free_done(void *token, bool ok)
{
    hooks_inflight_token = NULL;
    uint64_t size = 0;
    uint32_t stack = 0;
    bool chain = ok && oom_chain != NULL;
    if (chain) {
        size = record_token_size(token);
        stack = record_token_stack(token);
    }
    record_free_finish(token, ok, ok ? 0 : clock_now_ns());
    if (chain)
        oom_on_free(size, stack);
}

void hooks_free_done_slow(void *token, bool ok)
{
    hooks_guard.busy = 1;
    free_done(token, ok);
    hooks_guard.busy = 0;
}

void hooks_free_end(struct hook_free *f, bool ok)
{
    if (f->guarded && f->traced)
        hooks_guard.busy = 1;
    if (f->token != NULL)
        free_done(f->token, ok);
    if (f->guarded)
        call_leave(&f->outer, f->traced);
    else
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
