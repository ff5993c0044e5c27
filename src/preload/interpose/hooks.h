/* hooks.h - what every wrapper shares: the re-entry guard, the device of a
 * call, and reporting an allocation, a failure or a free to the tracker.
 *
 * A wrapper does three things (docs/design.md): call the real function, tell the
 * tracker what happened, return the real result unchanged.  The guard makes
 * only the outermost CUDA call of a thread count: the runtime's cudaMalloc
 * calling the driver's cuMemAlloc_v2 through a pointer we handed out is one
 * allocation, recorded with the stack of the application's call.  The guard
 * is also held while the library initialises.
 */
#ifndef CUMEMTRACE_HOOKS_H
#define CUMEMTRACE_HOOKS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "phases.h"
#include "python.h"
#include "record.h"
#include "resolve.h"

#pragma GCC visibility push(hidden) /* direct addressing, no GOT entries */

/* What a thread's calls share (call_state.c), in one TLS block: each
 * distinct TLS variable costs the wrappers a GOT load per function. */
struct hooks_guard {
    unsigned char layer; /* of the traced outermost allocation/free call */
    unsigned char busy;  /* in our bookkeeping */
} __attribute__((aligned(2))); /* read as one 16-bit word: hooks_passthrough */
struct hooks_device_cache {
    unsigned gen, epoch; /* gen 0: empty */
    int device;          /* >= 0 when filled */
};
struct hooks_thread {
    int depth;                /* the re-entry guard: hooks_depth */
    struct hooks_guard guard; /* hooks_guard, below */
    bool known;               /* this thread's exit will give back what the
                                 library holds for it */
    unsigned device_epoch;    /* bumped by this thread's device switches */
    struct hooks_device_cache device[2]; /* see hooks_device() */
    void *inflight_token;     /* a free's entry, taken out before the real free */
};
extern __thread struct hooks_thread hooks_thread __attribute__((tls_model("initial-exec")));
#define hooks_depth (hooks_thread.depth)
#define hooks_thread_known (hooks_thread.known)

extern int hooks_ready;          /* set once initialisation finished */
extern int hooks_touched;        /* the process called a wrapper */
extern volatile int hooks_dump_requested; /* set by the opt-in signal */
extern bool hooks_enabled;       /* tracing is on (set once, at init) */

/* Zero when an outermost call may take the fast path (hooks_fast below);
 * otherwise the HOOKS_SLOW_* reasons it may not, each a duty of hook_enter
 * or a setting of the generic path.  Cleared and set with atomic and/or
 * (the dump signal's handler sets its bit). */
extern int hooks_slow;
enum {
    HOOKS_SLOW_INIT = 1,      /* not initialised, or tracing off (init.c) */
    HOOKS_SLOW_UNTOUCHED = 2, /* hooks_first_touch has not run (init.c) */
    HOOKS_SLOW_DUMP = 4,      /* a dump was asked for (init.c) */
    HOOKS_SLOW_LIMIT = 8      /* CUMEMTRACE_LIMIT reserves around the real
                                 call (call_state.c) */
};

/* ---- the wrappers' way up into start-up (init.c) ----
 * hook_enter below is the one place code under start-up calls up into it,
 * through these three: start-up on first use (a wrapper called before our
 * constructor ran - another library's constructor calling CUDA), the first
 * CUDA call, and a dump a signal asked for, served outside every lock.
 * What start-up initialises calls nothing else of it
 * (tests/e2e/test_link_cycles.py, ENTRY). */

/* Runs initialisation if it has not run (pthread_once).  */
void hooks_init_once(void);
/* The process's first CUDA call: calibrates the clock and loads the
 * unwinder (once per lineage; every thread that gets here waits for it),
 * then sets hooks_touched and, once per process tree lineage, says what
 * the settings got wrong and checks where files will go (init.c). */
void hooks_first_touch(void);
/* The exec family (hooks_exec.c): looks up the real exec functions. */
void hooks_exec_init(void);
/* Writes the snapshot a signal asked for (called outside every lock). */
void hooks_service_dump_request(void);
/* Per-thread state (call_state.c): the key whose destructor runs when a
 * thread ends - returns, is cancelled or calls pthread_exit - and gives
 * back what the library held for it.  call_state_init runs once at
 * start-up, after the settings and the tracker (it also reads what the
 * fast path below needs of them); hooks_thread_start once per thread, from
 * its first traced call. */
void call_state_init(void);
void hooks_thread_start(void);

/* True when this call should be traced: outermost on this thread, tracing
 * enabled.  Every call must be paired with hook_leave(). */
static inline bool hook_enter(void)
{
    if (hooks_depth++ != 0)
        return false;
    if (__builtin_expect(!__atomic_load_n(&hooks_ready, __ATOMIC_ACQUIRE), 0))
        hooks_init_once();
    if (__builtin_expect(!hooks_thread_known, 0))
        hooks_thread_start();
    /* test first: a store on every call would bounce the cache line */
    if (!__atomic_load_n(&hooks_touched, __ATOMIC_ACQUIRE))
        hooks_first_touch();
    if (__builtin_expect(__atomic_load_n(&hooks_dump_requested, __ATOMIC_RELAXED), 0))
        hooks_service_dump_request();
    return hooks_enabled;
}

static inline void hook_leave(void)
{
    hooks_depth--;
}

/* Device ordinal of the calling thread's current context (driver calls) or
 * current device (runtime calls); 0 when it cannot be told.  Cached per
 * thread: asking costs a call into the driver or runtime per allocation. */
int hooks_driver_device(void);
int hooks_runtime_device(void);
/* Forgets the cached device after a call that may change it: this
 * thread's (cudaSetDevice, cuCtxSetCurrent/Push/Pop, cuCtxCreate), or, with
 * every_thread, all threads' (a context destroyed or reset).  Async-signal-
 * safe; callable before initialisation. */
void hooks_device_changed(bool every_thread);

/* The cache behind hooks_*_device (call_state.c): an entry of
 * hooks_thread.device is good while its `gen` matches hooks_device_gen
 * (bumped when a context is destroyed or reset) and its `epoch` the
 * thread's device_epoch (bumped by the thread's own switches).  Entry 0:
 * the driver's answer, 1: the runtime's. */
extern unsigned hooks_device_gen;
/* Asks the driver (layer 0) or the runtime (1) and caches the answer. */
int hooks_device_fill(int layer);

/* hooks_*_device without the call: the cached value, or a fill on a miss. */
static inline int hooks_device(int layer)
{
    unsigned gen = __atomic_load_n(&hooks_device_gen, __ATOMIC_ACQUIRE);
    const struct hooks_device_cache *c = &hooks_thread.device[layer];
    /* a filled entry's device is >= 0, and an empty one (gen 0) never
     * matches: hooks_device_gen starts at 1 */
    if (__builtin_expect(c->gen == gen && c->epoch == hooks_thread.device_epoch, 1))
        return c->device;
    return hooks_device_fill(layer);
}

/* The created context (hooks_context_owner.c) current on this thread, as the
 * tracker numbers it (record_alloc.ctx): 0 for a primary context.  Costs two
 * atomic loads while the process has no created context.  Called after each
 * successful allocation (the first one also arms the exit guard). */
unsigned hooks_context_owner(void);
/* Set once the exit guard is armed and while no created context lives: the
 * owner is then 0 without a call (hooks_context_owner.c keeps it). */
extern int hooks_context_plain;
static inline unsigned hooks_context_owner_fast(void)
{
    if (__builtin_expect(__atomic_load_n(&hooks_context_plain, __ATOMIC_RELAXED), 1))
        return 0;
    return hooks_context_owner();
}
/* After an allocation whose owner was RECORD_CONTEXT_OVERFLOW: notes its
 * address under the context hooks_context_owner found (hooks_context_owner.c). */
void hooks_context_allocated(uintptr_t addr);
/* fork(): the child owns none of the parent's contexts (and no lock). */
void hooks_context_atfork_child(void);
/* The table behind hooks_context_owner (hooks_context_owner.c), for the
 * context wrappers: a created context and its device; its number (0: not
 * ours) and device; forgetting number n (after its memory was); and
 * whether the process is exiting (a context's end then forgets nothing). */
void hooks_context_add(CUcontext ctx, int device);
unsigned hooks_context_find(CUcontext ctx, int *device);
void hooks_context_remove(unsigned n);
bool hooks_context_exiting(void);
/* A context past the numbered ones (hooks_context_find said
 * RECORD_CONTEXT_OVERFLOW): takes it out of the table and hands over what
 * was allocated in it (*v, malloc'd, *n entries; the caller frees it). */
void hooks_context_remove_overflow(CUcontext ctx, struct record_owned **v, size_t *n);

/* What the calling thread is doing, for telling a nested call from a signal
 * handler's new one (call_state.c, "Signal handlers"). */
enum { HOOKS_LAYER_NONE, HOOKS_LAYER_RUNTIME, HOOKS_LAYER_DRIVER };
/* hooks_guard read as a 16-bit word: `layer`, not busy */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOOKS_GUARD_IDLE(layer) ((uint16_t)(layer))
#else
#define HOOKS_GUARD_IDLE(layer) ((uint16_t)((layer) << 8))
#endif
_Static_assert(sizeof(struct hooks_guard) == 2, "hooks_guard is one 16-bit word");
#define hooks_guard (hooks_thread.guard)

/* True when a call of `slot` is the same allocation or free one layer down
 * (the runtime's cudaMalloc reaching cuMemAlloc_v2 through us) or runs
 * under another untraced call of ours: the wrapper then only calls the real
 * function, between hooks_depth++ and --.  The first test call_enter
 * makes, inlined in the wrappers so the nested layer costs a few
 * instructions instead of two calls into the bookkeeping. */
static inline bool hooks_passthrough(unsigned slot)
{
    if (hooks_depth == 0)
        return false;
    /* !busy && (layer == NONE || (layer == RUNTIME && a driver slot)), as
     * one load and one compare of both bytes */
    uint16_t w;
    memcpy(&w, &hooks_guard, sizeof w);
    return w == HOOKS_GUARD_IDLE(HOOKS_LAYER_NONE) ||
           (slot < SLOT_DRIVER_END && w == HOOKS_GUARD_IDLE(HOOKS_LAYER_RUNTIME));
}

/* What a traced allocation or free call interrupted by a signal handler
 * must get back when the handler's own call ends (see call_state.c). */
struct hook_outer {
    bool fresh;            /* this call began inside another one's real call */
    int depth;
    unsigned char layer;
    bool reserved;
    int device;
    uint64_t bytes;
    void *token;
};

/* One allocation call, from before the real call to after it. */
struct hook_alloc {
    unsigned slot;         /* entry point (resolve.h) */
    enum record_kind kind;
    int device;            /* -1: ask the driver/runtime for the current one */
    uint64_t requested;    /* bytes asked for (an estimate for pitched calls) */
    bool traced;           /* outermost call with tracing on */
    bool reserved;         /* bytes reserved against CUMEMTRACE_LIMIT */
    bool runtime;          /* a runtime entry point (how to find the device) */
    struct hook_outer outer;
    /* The wrapper's frame (HOOK_FRAME): stacks are walked from its caller,
     * not through our own frames.  NULL: from the capture itself. */
    const void *frame;
};

/* The calling wrapper's frame address; using it makes the compiler give the
 * wrapper a frame pointer, so its caller's state is at a known place. */
#define HOOK_FRAME() __builtin_frame_address(0)

/* Before the real call.  Returns false when CUMEMTRACE_LIMIT refuses the
 * request: the wrapper then returns its API's out-of-memory code without
 * calling the real function (the post-mortem is already recorded).
 * `runtime` says how to find the current device. */
bool hooks_alloc_begin(struct hook_alloc *c, bool runtime);
/* After the real call: ok = success, oom = the API's out-of-memory code.
 * addr/size: the new allocation (size = bytes charged). */
void hooks_alloc_end(struct hook_alloc *c, bool ok, bool oom, uintptr_t addr,
                     uint64_t size, bool is_handle);

/* One free call.  The entry is taken out before the real free, so another
 * thread cannot be handed the same address in between. */
struct hook_free {
    void *token;
    bool traced;
    bool guarded;          /* began by hooks_free_begin */
    struct hook_outer outer;
};
/* `slot`: the entry point (its layer tells a handler's call from the
 * runtime reaching the driver). */
void hooks_free_begin(struct hook_free *f, unsigned slot, uintptr_t addr,
                      enum record_kind kind_hint);
void hooks_free_end(struct hook_free *f, bool ok);

/* ---- the fast path ----
 * An outermost allocation or free (hooks_depth == 0) in the steady state -
 * initialised, tracing on, this thread and the process already seen, no
 * dump asked for, no CUMEMTRACE_LIMIT to reserve against - skips the
 * generic begin/end calls: the wrapper's sym##_fast writes the state of
 * call_enter/call_leave (call_state.c) directly - hooks_depth 1 and the
 * call's layer while the real call runs, `busy` around our bookkeeping -
 * and calls the tracker itself.  A signal handler's call arriving in
 * between meets the same TLS state as on the generic path, which handles
 * it; the order of the stores below keeps every window the generic path
 * has and no other (a handler's call before hooks_depth is set is a new
 * outermost call that puts everything back before we resume). */

static inline bool hooks_fast(void)
{
    return hooks_depth == 0 &&
           __builtin_expect(__atomic_load_n(&hooks_slow, __ATOMIC_ACQUIRE) == 0 &&
                            hooks_thread_known, 1);
}

#define HOOKS_LAYER_OF(slot) \
    ((slot) < SLOT_DRIVER_END ? HOOKS_LAYER_DRIVER : HOOKS_LAYER_RUNTIME)

static inline void hooks_fast_enter(unsigned slot)
{
    hooks_depth = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hooks_guard.layer = HOOKS_LAYER_OF(slot);
}

static inline void hooks_fast_leave(void)
{
    hooks_depth = 0; /* first: a handler's call from here on is outermost */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hooks_guard.layer = HOOKS_LAYER_NONE;
}

/* The device an allocation of `kind` is charged to, as hooks_alloc_begin
 * finds it (-1 for host-pinned memory, whose device is its context's).  The
 * fast path asks after the real call, which does not change it. */
static inline int hooks_fast_device(enum record_kind kind, bool runtime)
{
    return kind == KIND_HOST_PINNED ? -1 : hooks_device(runtime ? 1 : 0);
}

/* The calling thread's OOM chain state (oom.h), NULL until its first
 * failure; declared here as well so that this header needs not include
 * oom.h (whose includes lead back to the modules that include this one). */
struct oom_info;
extern __thread struct oom_info *oom_chain __attribute__((tls_model("initial-exec")));

/* After the real allocation failed (oom: with the API's out-of-memory
 * code), from the fast path. */
void hooks_fast_alloc_failed(unsigned slot, enum record_kind kind, int device,
                             uint64_t size, bool oom, const void *frame);

/* What an allocation's record needs beyond the steady state, out of line
 * (call_state.c): the stack's frames when CUMEMTRACE_DEPTH > 0 (native,
 * Python merged in), returning their count; the device of host-pinned
 * memory (its context's); and the OOM chain's success. */
unsigned hooks_capture_frames(void **frames, const void *from);
int hooks_pinned_device(bool runtime);
void hooks_oom_success(enum record_kind kind, int device, uint64_t requested);

/* After the real allocation succeeded (addr 0: nothing was allocated), from
 * the fast path: what alloc_done (call_state.c) does, inlined into each
 * wrapper's fast function so that a pair crosses one function of ours
 * less (its prologue, epilogue and argument moves were ~80 instructions of
 * the ~620 a pair added with no stack).  `device` as hooks_fast_device. */
static inline __attribute__((always_inline)) void
hooks_fast_alloc_done(unsigned slot, enum record_kind kind, int device, bool runtime,
                      uintptr_t addr, uint64_t size, const void *frame)
{
    hooks_guard.busy = 1;
    if (__builtin_expect(addr != 0, 1)) {
        int dev = device;
        if (kind == KIND_HOST_PINNED) /* owned by the context that made it */
            dev = hooks_pinned_device(runtime);
        struct record_alloc a = {addr, size, size, kind, dev,
                                 false, (uint16_t)hooks_context_owner_fast(), phase_now()};
        void *frames[RECORD_MAX_DEPTH];
        unsigned n = config.depth != 0 ? hooks_capture_frames(frames, frame) : 0;
        record_alloc_at(&a, slot, frames, n, clock_now_ns());
        if (__builtin_expect(a.ctx == RECORD_CONTEXT_OVERFLOW, 0))
            hooks_context_allocated(addr); /* after: its time bounds the entry's */
        if (__builtin_expect(__atomic_load_n(&python_mode, __ATOMIC_RELAXED) == PYTHON_ON, 0))
            python_arm_torch_layer();
    }
    if (__builtin_expect(oom_chain != NULL, 0))
        hooks_oom_success(kind, device, size);
    hooks_guard.busy = 0;
}

/* A free's entry, taken out before the real free and kept where the end of
 * the thread finds it (call_state.c); NULL for address 0 or one we never
 * saw. */
#define hooks_inflight_token (hooks_thread.inflight_token)

static inline void *hooks_fast_free_take(uintptr_t addr, enum record_kind hint)
{
    if (addr == 0)
        return NULL;
    hooks_guard.busy = 1;
    void *token = record_free_take(addr, hint, clock_now_ns());
    hooks_inflight_token = token;
    hooks_guard.busy = 0; /* the real call runs */
    return token;
}


/* The real free returned; `token` is not NULL. */
void hooks_free_done_slow(void *token, bool ok);
static inline void hooks_fast_free_done(void *token, bool ok)
{
    if (__builtin_expect(!ok || oom_chain != NULL, 0)) {
        hooks_free_done_slow(token, ok);
        return;
    }
    hooks_guard.busy = 1;
    hooks_inflight_token = NULL;
    record_free_done(token);
    hooks_guard.busy = 0;
}

/* The two shapes most wrappers have, written once.  An allocation whose
 * pointer comes back through `out_arg` and whose size is `size_arg`; a free
 * of `ptr_arg`.  `params` and `args` are the parenthesised parameter list
 * and argument list of the CUDA function.  Three paths: the fast one above,
 * the nested call one layer down (hooks_passthrough), and the generic one
 * (hooks_alloc_begin/end, hooks_free_begin/end) for everything else. */
#define HOOK_UNPAREN(...) __VA_ARGS__

/* Where the fast function goes: into the wrapper itself in a file that
 * defines HOOK_FAST_INLINE (the runtime's: their wrappers are entered
 * only outermost in the steady state, so the frame the fast path needs
 * costs no other path much), else a function of its own that the wrapper
 * tail-calls (the driver's: the runtime's nested call through them must
 * stay a dozen instructions, with no frame). */
/* The real function, which the wrapper found loaded: inlined, the fast
 * function takes it as an argument; apart, it loads it again (one
 * instruction), so that the wrapper passes its own arguments on untouched
 * (no moves on the nested call's path either). */
#ifdef HOOK_FAST_INLINE
#define HOOK_FAST_ATTR static inline __attribute__((always_inline))
#define HOOK_FAST_REAL(...) __VA_ARGS__,
#define HOOK_FAST_LOAD(sym)
#else
#define HOOK_FAST_ATTR static __attribute__((noinline))
#define HOOK_FAST_REAL(...)
#define HOOK_FAST_LOAD(sym) \
    PFN(sym) real = (PFN(sym))__atomic_load_n(&resolve_reals[SLOT_##sym], __ATOMIC_RELAXED);
#endif

/* The wrapper itself: calls only in tail position, so it needs no frame
 * of its own (the nested layer costs ten instructions) and the frame
 * that sym##_fast or sym##_generic takes (HOOK_FRAME) is the caller's
 * record - return address into the application.  With HOOK_FAST_INLINE
 * the fast path is the wrapper's own body and its frame the same record
 * (the other paths leave it before their tail calls).  Where a compiler
 * does not make the tail calls (no optimisation), the walk from that frame
 * starts in the wrapper and unwind_capture falls back to dropping our
 * frames. */
#define HOOK_DISPATCH(ret_t, no_real, sym, params, args)                      \
    static __attribute__((noinline)) ret_t sym##_resolve params               \
    {                                                                         \
        PFN(sym) real = REAL(sym);                                            \
        if (real == NULL)                                                     \
            return no_real;                                                   \
        return sym##_generic(real, HOOK_UNPAREN args);                        \
    }                                                                         \
    ret_t sym params                                                          \
    {                                                                         \
        PFN(sym) real = (PFN(sym))__atomic_load_n(&resolve_reals[SLOT_##sym], \
                                                  __ATOMIC_ACQUIRE);          \
        if (__builtin_expect(real != NULL, 1)) {                              \
            if (hooks_passthrough(SLOT_##sym))                                \
                return real args;                                             \
            if (hooks_fast())                                                 \
                return sym##_fast(HOOK_FAST_REAL(real) HOOK_UNPAREN args);    \
            return sym##_generic(real, HOOK_UNPAREN args);                    \
        }                                                                     \
        return sym##_resolve args; /* first call, or no such function */      \
    }

#define HOOK_ALLOC(ret_t, no_real, ok, oom, runtime, sym, kind, size_arg,     \
                   out_arg, params, args)                                     \
    HOOK_FAST_ATTR ret_t                                                      \
    sym##_fast(HOOK_FAST_REAL(PFN(sym) real) HOOK_UNPAREN params)             \
    {                                                                         \
        HOOK_FAST_LOAD(sym)                                                   \
        hooks_fast_enter(SLOT_##sym);                                         \
        ret_t r = real args;                                                  \
        if (r == ok)                                                          \
            hooks_fast_alloc_done(SLOT_##sym, kind, hooks_fast_device(kind, runtime), \
                                  runtime, (uintptr_t)*(out_arg), (size_arg),   \
                                  HOOK_FRAME());                              \
        else                                                                  \
            hooks_fast_alloc_failed(SLOT_##sym, kind, hooks_fast_device(kind, runtime), \
                                    (size_arg), r == oom, HOOK_FRAME());      \
        hooks_fast_leave();                                                   \
        return r;                                                             \
    }                                                                         \
    static __attribute__((noinline)) ret_t                                    \
    sym##_generic(PFN(sym) real, HOOK_UNPAREN params)                         \
    {                                                                         \
        struct hook_alloc c = {SLOT_##sym, kind, -1, (size_arg), false, false, false, \
                               {0}, HOOK_FRAME()};                            \
        if (!hooks_alloc_begin(&c, runtime))                                  \
            return oom; /* refused by CUMEMTRACE_LIMIT */                     \
        ret_t r = real args;                                                  \
        hooks_alloc_end(&c, r == ok, r == oom,                                \
                        r == ok ? (uintptr_t)*(out_arg) : 0, (size_arg), false); \
        return r;                                                             \
    }                                                                         \
    HOOK_DISPATCH(ret_t, no_real, sym, params, args)

#define HOOK_FREE(ret_t, no_real, ok, sym, hint, ptr_arg, params, args)       \
    HOOK_FAST_ATTR ret_t                                                      \
    sym##_fast(HOOK_FAST_REAL(PFN(sym) real) HOOK_UNPAREN params)             \
    {                                                                         \
        HOOK_FAST_LOAD(sym)                                                   \
        hooks_fast_enter(SLOT_##sym);                                         \
        void *t = hooks_fast_free_take((uintptr_t)(ptr_arg), hint);           \
        ret_t r = real args;                                                  \
        if (t != NULL)                                                        \
            hooks_fast_free_done(t, r == ok);                                 \
        hooks_fast_leave();                                                   \
        return r;                                                             \
    }                                                                         \
    static __attribute__((noinline)) ret_t                                    \
    sym##_generic(PFN(sym) real, HOOK_UNPAREN params)                         \
    {                                                                         \
        struct hook_free f;                                                   \
        hooks_free_begin(&f, SLOT_##sym, (uintptr_t)(ptr_arg), hint);         \
        ret_t r = real args;                                                  \
        hooks_free_end(&f, r == ok);                                          \
        return r;                                                             \
    }                                                                         \
    HOOK_DISPATCH(ret_t, no_real, sym, params, args)

/* cuMemGetInfo/cudaMemGetInfo: remembers the truth for post-mortems and,
 * under CUMEMTRACE_LIMIT, shows the limited card (total = limit, free =
 * min(free, limit - tracked), never negative).  NULL outputs tolerated. */
void hooks_meminfo(int device, size_t *free_bytes, size_t *total_bytes);

#pragma GCC visibility pop

#endif
