/* hooks_fast.h - the allocation and free wrappers' own code: the steady
 * state's fast path, with the tracker's steady state inlined into it
 * (track/record_fast.h), and the macros that write a wrapper
 * (HOOK_ALLOC, HOOK_FREE).  Included by the files that define wrappers
 * only (hooks_runtime.c, hooks_driver.c): it brings the tracker's private
 * state with it.  What the paths share with the generic one is hooks.h.
 */
#ifndef CUMEMTRACE_HOOKS_FAST_H
#define CUMEMTRACE_HOOKS_FAST_H

#include <assert.h>

#include "hooks.h"
#include "record_fast.h"

#pragma GCC visibility push(hidden) /* direct addressing, no GOT entries */

/* ---- the fast path ----
 * An outermost allocation or free (hooks_depth == 0) in the steady state -
 * initialised, tracing on, this thread and the process already seen, no
 * dump asked for, no CUMEMTRACE_LIMIT to reserve against, no created
 * context (hooks_slow clear, HOOKS_WORD_IDLE) - skips the
 * generic begin/end calls: the wrapper's sym##_fast writes the state of
 * call_enter/call_leave (call_state.c) directly - hooks_depth 1 and the
 * call's layer while the real call runs, `busy` around our bookkeeping -
 * and calls the tracker itself.  A signal handler's call arriving in
 * between meets the same TLS state as on the generic path, which handles
 * it: entering and leaving are one store each (hooks_fast_enter), so
 * there is no window the generic path does not have. */

/* hooks_word in the steady state's outermost call: no call of ours on
 * this thread, known; and in the runtime's call one layer down (the
 * fast path's runtime entry point in its real call): hooks_passthrough's
 * common case. */
#define HOOKS_WORD_IDLE HOOKS_WORD(0, HOOKS_LAYER_NONE, 0, 1)
#define HOOKS_WORD_NESTED HOOKS_WORD(1, HOOKS_LAYER_RUNTIME, 0, 1)

/* With w == HOOKS_WORD_IDLE: nothing process-wide keeps the call off the
 * fast path. */
static inline bool hooks_fast(void)
{
    return __builtin_expect(__atomic_load_n(&hooks_slow, __ATOMIC_ACQUIRE) == 0, 1);
}

/* The call's state - hooks_depth 1, the call's layer, and `busy` when the
 * bookkeeping comes first (a free's) - in one store of the thread's word:
 * a handler's call just before it is a new outermost call that puts
 * everything back before we resume, one just after meets the state of the
 * generic path's call_enter (busy: passed through; in the real call: a
 * handler's new call).  The word was HOOKS_WORD_IDLE (known set) when the
 * wrapper chose this path, and nothing in between changes `known`. */
static inline void hooks_fast_enter(unsigned slot, unsigned char busy)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hooks_word_set(HOOKS_WORD(1, HOOKS_LAYER_OF(slot), busy, 1));
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Also ends the bookkeeping: depth 0, no layer, not busy, in one store
 * (HOOKS_WORD_IDLE) - a handler's call before it meets busy or the real
 * call's layer as above, one after is outermost. */
static inline void hooks_fast_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hooks_word_set(HOOKS_WORD_IDLE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* The device an allocation of `kind` is charged to, as hooks_alloc_begin
 * finds it (-1 for host-pinned memory, whose device is its context's).  The
 * fast path asks after the real call, which does not change it. */
static inline int hooks_fast_device(enum record_kind kind, bool runtime)
{
    if (FORMAT_KIND_ON_HOST(kind))
        return -1;
    int d = hooks_device(runtime ? 1 : 0);
    if (d < 0) /* never: the cache holds, and a fill returns, an ordinal */
        __builtin_unreachable();
    return d;
}

/* After the real allocation succeeded (addr 0: nothing was allocated), from
 * the fast path: what alloc_done (call_state.c) does, inlined into each
 * wrapper's fast function so that a pair crosses one function of ours
 * less (its prologue, epilogue and argument moves were a visible share of
 * what a pair adds).  `device` as hooks_fast_device. */
static inline __attribute__((always_inline)) void
hooks_fast_alloc_done(unsigned slot, enum record_kind kind, int device, bool runtime,
                      uintptr_t addr, uint64_t size, const void *frame)
{
    hooks_guard.busy = 1;
    if (__builtin_expect(addr != 0, 1)) {
        int dev = device;
        if (FORMAT_KIND_ON_HOST(kind)) /* owned by the context that made it */
            dev = hooks_pinned_device(runtime);
        /* owner 0, the primary context: no created context lived when the
         * call began (HOOKS_SLOW_CONTEXT) */
        struct record_alloc a = {addr, size, size, kind, dev, false, 0, phase_now()};
        void *frames[RECORD_MAX_DEPTH];
        unsigned n = config.depth != 0 ? hooks_capture_frames(frames, frame) : 0;
        if (n > RECORD_MAX_DEPTH) /* never: a capture fills frames[] at most */
            __builtin_unreachable();
        /* never 0: `known` (hooks_thread_start; a fork child starts again,
         * init.c), so the tracker's test for it folds away; debug builds
         * (the sanitizer suites) check it */
#ifdef CUMEMTRACE_DEBUG
        assert(record_tc.tid != 0);
#else
        if (record_tc.tid == 0)
            __builtin_unreachable();
#endif
        record_alloc_fast(&a, slot, frames, n, clock_now_ns());
        if (__builtin_expect(__atomic_load_n(&python_mode, __ATOMIC_RELAXED) == PYTHON_ON, 0))
            python_arm_torch_layer();
    }
    if (__builtin_expect(oom_chain != NULL, 0))
        hooks_oom_success(kind, device, size);
    /* still busy: hooks_fast_leave ends it */
}

static inline __attribute__((always_inline)) void *
hooks_fast_free_take(uintptr_t addr, enum record_kind hint)
{
    /* busy since hooks_fast_enter */
    if (addr == 0) {
        hooks_guard.busy = 0;
        return NULL;
    }
    void *token = record_free_take_fast(addr, hint, clock_now_ns());
    hooks_inflight_token = token;
    hooks_guard.busy = 0; /* the real call runs */
    return token;
}


/* The real free returned; `token` is not NULL. */
static inline __attribute__((always_inline)) void hooks_fast_free_done(void *token, bool ok)
{
    if (__builtin_expect(!ok || oom_chain != NULL, 0)) {
        hooks_free_done_slow(token, ok);
        return;
    }
    hooks_guard.busy = 1;
    hooks_inflight_token = NULL;
    record_free_done_fast(token);
    /* still busy: hooks_fast_leave ends it */
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
            uint64_t w = hooks_word();                                        \
            if (SLOT_##sym < SLOT_DRIVER_END && w == HOOKS_WORD_NESTED)       \
                return real args; /* hooks_passthrough's common case */       \
            if (__builtin_expect(w == HOOKS_WORD_IDLE, 1) && hooks_fast())    \
                return sym##_fast(HOOK_FAST_REAL(real) HOOK_UNPAREN args);    \
            if (hooks_passthrough(SLOT_##sym))                                \
                return real args;                                             \
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
        hooks_fast_enter(SLOT_##sym, 0);                                      \
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
        hooks_fast_enter(SLOT_##sym, 1);                                      \
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

#pragma GCC visibility pop

#endif
