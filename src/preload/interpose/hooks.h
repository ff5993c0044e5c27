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
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "phases.h"
#include "python.h"
#include "record.h"
#include "resolve.h"
#include "thread_hot.h"

#pragma GCC visibility push(hidden) /* direct addressing, no GOT entries */

/* hooks_thread (thread_hot.h): what a thread's calls share (call_state.c;
 * the types are hooks_thread.h), in the thread's hot TLS block, where the
 * wrappers reach it, the tracker's thread cache, the phase and the OOM
 * chain from one base. */
#define hooks_depth (hooks_thread.depth)
#define hooks_thread_known (hooks_thread.known)

/* The first eight bytes of hooks_thread - depth, the guard's layer and
 * busy, known - read as one word: the wrappers tell their two common
 * states, the steady state's outermost call and the runtime's call one
 * layer down, by one load and one compare (hooks_fast.h); and the fast
 * path enters and leaves its call by one store of it. */
_Static_assert(offsetof(struct hooks_thread_state, guard) == 4 &&
               offsetof(struct hooks_thread_state, known) == 6 &&
               offsetof(struct hooks_thread_state, zero) == 7 &&
               offsetof(struct hooks_thread_state, word) == 0 &&
               sizeof(uint64_t) == 8, "hooks_word's layout");
static inline uint64_t hooks_word(void)
{
    return hooks_thread.word; /* plain: a load the compare can fold in */
}
/* One store (atomic: a signal handler's call finds the word as it was or
 * as it is, never half of it). */
static inline void hooks_word_set(uint64_t w)
{
    __atomic_store_n(&hooks_thread.word, w, __ATOMIC_RELAXED);
}
/* Little-endian: CUDA runs on no other CPU (stream.c) */
#define HOOKS_WORD(depth, layer, busy, known) \
    ((uint64_t)(uint32_t)(depth) | (uint64_t)(layer) << 32 | (uint64_t)(busy) << 40 | \
     (uint64_t)(known) << 48)

extern int hooks_ready;          /* set once initialisation finished */
extern int hooks_touched;        /* the process called a wrapper */
extern volatile int hooks_dump_requested; /* set by the opt-in signal */
extern bool hooks_enabled;       /* tracing is on (set once, at init) */

/* Zero when an outermost call may take the fast path (hooks_fast.h);
 * otherwise the HOOKS_SLOW_* reasons it may not, each a duty of hook_enter
 * or a setting of the generic path.  Cleared and set with atomic and/or
 * (the dump signal's handler sets its bit).  Defined in
 * hooks_context_owner.c, the lowest of the files that write it. */
extern int hooks_slow;
enum {
    HOOKS_SLOW_INIT = 1,      /* not initialised, or tracing off (init.c) */
    HOOKS_SLOW_UNTOUCHED = 2, /* hooks_first_touch has not run (init.c) */
    HOOKS_SLOW_DUMP = 4,      /* a dump was asked for (init.c) */
    HOOKS_SLOW_LIMIT = 8,     /* CUMEMTRACE_LIMIT reserves around the real
                                 call (call_state.c) */
    HOOKS_SLOW_CONTEXT = 16   /* not hooks_context_plain: an allocation's
                                 owner must be asked, and the first one arms
                                 the exit guard (hooks_context_owner.c); the
                                 fast path records owner 0 */
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
 * (bumped when a context is destroyed or reset); the thread's own switches
 * empty its entries (gen 0) and bump its device_epoch, which tells a fill
 * that a switch came in between.  Entry 0: the driver's answer, 1: the
 * runtime's. */
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
    if (__builtin_expect(c->gen == gen, 1))
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
/* hooks_guard as a 16-bit word: `layer` and `busy`; IDLE: not busy */
#define HOOKS_GUARD_WORD(layer, busy) ((uint16_t)((layer) | (busy) << 8))
#define HOOKS_GUARD_IDLE(layer) HOOKS_GUARD_WORD(layer, 0)
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
/* What the fast path (hooks_fast.h, the allocation wrappers' own) calls
 * out of line (call_state.c) and shares with the generic path. */
#define HOOKS_LAYER_OF(slot) \
    ((slot) < SLOT_DRIVER_END ? HOOKS_LAYER_DRIVER : HOOKS_LAYER_RUNTIME)

/* The calling thread's OOM chain state (oom.h), NULL until its first
 * failure: oom_chain, from thread_hot.h, so that this header needs not
 * include oom.h (whose includes lead back to the modules that include this
 * one). */

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

/* A free's entry, taken out before the real free and kept where the end of
 * the thread finds it (call_state.c); NULL for address 0 or one we never
 * saw. */
#define hooks_inflight_token (hooks_thread.inflight_token)

/* The real free returned, not in the steady state (it failed, or an OOM
 * chain is open); `token` is not NULL. */
void hooks_free_done_slow(void *token, bool ok);

/* cuMemGetInfo/cudaMemGetInfo: remembers the truth for post-mortems and,
 * under CUMEMTRACE_LIMIT, shows the limited card (total = limit, free =
 * min(free, limit - tracked), never negative).  NULL outputs tolerated. */
void hooks_meminfo(int device, size_t *free_bytes, size_t *total_bytes);

#pragma GCC visibility pop

#endif
