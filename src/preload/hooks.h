/* hooks.h - what every wrapper shares: the re-entry guard, the device of a
 * call, and reporting an allocation, a failure or a free to the tracker.
 *
 * A wrapper does three things (DESIGN.md): call the real function, tell the
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

#include "record.h"
#include "resolve.h"

extern __thread int hooks_depth __attribute__((tls_model("initial-exec")));
/* This thread's exit will give back what the library holds for it. */
extern __thread bool hooks_thread_known __attribute__((tls_model("initial-exec")));
extern int hooks_ready;          /* set once initialisation finished */
extern int hooks_touched;        /* the process called a wrapper */
extern volatile int hooks_dump_requested; /* set by the opt-in signal */

/* Runs initialisation if it has not run (pthread_once).  */
void hooks_init_once(void);
/* The process's first CUDA call: sets hooks_touched and, once per process
 * tree lineage, says what the settings got wrong and checks where files
 * will go (init.c). */
void hooks_first_touch(void);
/* The exec family (hooks_exec.c).  hooks_before_exec writes the snapshot
 * of the image about to be replaced (reason "exec"; not in a vfork child,
 * not when `path` is given and not executable) and stores its name in
 * `written` ("" when none); hooks_exec_failed removes it again, so the exit
 * snapshot is written later instead.  Both keep errno. */
void hooks_exec_init(void);
void hooks_before_exec(const char *path, char *written, size_t n);
void hooks_exec_failed(const char *written);
/* The exit snapshot: from our atexit handler (python=false), or from a
 * Python host's Py_AtExit (python=true), which runs where an interrupted
 * interpreter re-raises SIGINT and no atexit handler follows. */
void hooks_write_exit_snapshot(bool python);
/* Writes the snapshot a signal asked for (called outside every lock). */
void hooks_service_dump_request(void);
/* Per-thread state (hooks_common.c): the key whose destructor runs when a
 * thread ends - returns, is cancelled or calls pthread_exit - and gives
 * back what the library held for it.  hooks_thread_init runs once at
 * start-up; hooks_thread_start once per thread, from its first traced call. */
void hooks_thread_init(void);
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
    if (!__atomic_load_n(&hooks_touched, __ATOMIC_RELAXED))
        hooks_first_touch();
    if (__builtin_expect(__atomic_load_n(&hooks_dump_requested, __ATOMIC_RELAXED), 0))
        hooks_service_dump_request();
    extern bool hooks_enabled;
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

/* The created context (hooks_context.c) current on this thread, as the
 * tracker numbers it (record_alloc.ctx): 0 for a primary context.  Costs two
 * atomic loads while the process has no created context.  Called after each
 * successful allocation (the first one also arms the exit guard). */
unsigned hooks_context_owner(void);
/* fork(): the child owns none of the parent's contexts (and no lock). */
void hooks_context_atfork_child(void);

/* What the calling thread is doing, for telling a nested call from a signal
 * handler's new one (hooks_common.c, "Signal handlers"). */
enum { HOOKS_LAYER_NONE, HOOKS_LAYER_RUNTIME, HOOKS_LAYER_DRIVER };
struct hooks_guard {
    unsigned char busy;  /* in our bookkeeping */
    unsigned char layer; /* of the traced outermost allocation/free call */
};
extern __thread struct hooks_guard hooks_guard __attribute__((tls_model("initial-exec")));

/* True when a call of `slot` is the same allocation or free one layer down
 * (the runtime's cudaMalloc reaching cuMemAlloc_v2 through us) or runs
 * under another untraced call of ours: the wrapper then only calls the real
 * function, between hooks_depth++ and --.  The first test call_enter
 * makes, inlined in the wrappers so the nested layer costs a few
 * instructions instead of two calls into the bookkeeping. */
static inline bool hooks_passthrough(unsigned slot)
{
    return hooks_depth != 0 && !hooks_guard.busy &&
           (hooks_guard.layer == HOOKS_LAYER_NONE ||
            (hooks_guard.layer == HOOKS_LAYER_RUNTIME && slot < SLOT_DRIVER_END));
}

/* What a traced allocation or free call interrupted by a signal handler
 * must get back when the handler's own call ends (see hooks_common.c). */
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

/* The two shapes most wrappers have, written once.  An allocation whose
 * pointer comes back through `out_arg` and whose size is `size_arg`; a free
 * of `ptr_arg`.  `params` and `args` are the parenthesised parameter list
 * and argument list of the CUDA function. */
#define HOOK_ALLOC(ret_t, no_real, ok, oom, runtime, sym, kind, size_arg,     \
                   out_arg, params, args)                                     \
    ret_t sym params                                                          \
    {                                                                         \
        PFN(sym) real = REAL(sym);                                            \
        if (real == NULL)                                                     \
            return no_real;                                                   \
        if (hooks_passthrough(SLOT_##sym)) {                                  \
            hooks_depth++;                                                    \
            ret_t r_ = real args;                                             \
            hooks_depth--;                                                    \
            return r_;                                                        \
        }                                                                     \
        struct hook_alloc c = {SLOT_##sym, kind, -1, (size_arg), false, false, false, \
                               {0}, HOOK_FRAME()};                            \
        if (!hooks_alloc_begin(&c, runtime))                                  \
            return oom; /* refused by CUMEMTRACE_LIMIT */                     \
        ret_t r = real args;                                                  \
        hooks_alloc_end(&c, r == ok, r == oom,                                \
                        r == ok ? (uintptr_t)*(out_arg) : 0, (size_arg), false); \
        return r;                                                             \
    }

#define HOOK_FREE(ret_t, no_real, ok, sym, hint, ptr_arg, params, args)       \
    ret_t sym params                                                          \
    {                                                                         \
        PFN(sym) real = REAL(sym);                                            \
        if (real == NULL)                                                     \
            return no_real;                                                   \
        if (hooks_passthrough(SLOT_##sym)) {                                  \
            hooks_depth++;                                                    \
            ret_t r_ = real args;                                             \
            hooks_depth--;                                                    \
            return r_;                                                        \
        }                                                                     \
        struct hook_free f;                                                   \
        hooks_free_begin(&f, SLOT_##sym, (uintptr_t)(ptr_arg), hint);                     \
        ret_t r = real args;                                                  \
        hooks_free_end(&f, r == ok);                                          \
        return r;                                                             \
    }

/* cuMemGetInfo/cudaMemGetInfo: remembers the truth for post-mortems and,
 * under CUMEMTRACE_LIMIT, shows the limited card (total = limit, free =
 * min(free, limit - tracked), never negative).  NULL outputs tolerated. */
void hooks_meminfo(int device, size_t *free_bytes, size_t *total_bytes);

#endif
