/* cumemtrace.h - the public API of libcumemtrace.so.
 *
 * Nothing here is needed to trace a program: LD_PRELOAD the library and every
 * CUDA allocation is recorded.  These functions let a program that knows it
 * runs under cumemtrace ask for a snapshot at a moment of its choosing (after
 * the first training step, before a checkpoint).  Resolve them with
 * dlsym(RTLD_DEFAULT, "cumemtrace_dump") so the program still runs without
 * the library.
 */
#ifndef CUMEMTRACE_H
#define CUMEMTRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUMEMTRACE_VERSION_MAJOR 0
#define CUMEMTRACE_VERSION_MINOR 1
#define CUMEMTRACE_VERSION_PATCH 0

/* Writes a snapshot now, with reason "api".  `path` names the file, or NULL
 * to name it from CUMEMTRACE_OUTPUT (with ".api.<n>" before ".json").  In a
 * PyTorch process it first has PyTorch's layer report its current figures
 * (cumemtrace_allocator_refresher below: on this thread when it holds the
 * GIL or is Python's main thread, e.g. called through ctypes; else waiting
 * at most 200 ms for the main thread).  An
 * existing file is never overwritten: a free name "<path>.<n>" is used.
 * Returns 0, or -1 after printing why on stderr (unwritable path, tracing
 * disabled), or -1 without a word while a termination signal ends the
 * process (its own snapshot is being written).  Thread-safe. */
int cumemtrace_dump(const char *path);

/* Writes the exit snapshot now: the host runtime says the program's own
 * code has ended (the PyTorch layer calls it from Python's atexit, before
 * the interpreter's teardown frees the tensors the program still held, so
 * "live at exit" is what memory_allocated() says at the end of the script).
 * The process's later exit paths keep that snapshot and rewrite it only if
 * something was allocated after it; frees alone are the teardown.  Returns
 * 0 when it wrote the snapshot, or -1 when it wrote nothing: tracing
 * disabled, a process that never used CUDA, or the exit snapshot already
 * written.  Call it once, from the thread that ends the program. */
int cumemtrace_exit_snapshot(void);

/* ---- marks: memory used since a moment (a test, a step) ----
 *
 * A mark records, for every device, what the process held when it was set,
 * and from then on the highest amount held (the "peak since the mark"),
 * exactly: the library compares on every allocation, as it does for the
 * all-time peak.  Marks nest: begin/end pairs form scopes, and an outer
 * mark's peak covers its inner marks too.  Marks are process-wide (not per
 * thread); begin and end them from one thread.  A snapshot written while a
 * mark is active carries each device's peak since the innermost mark and the
 * call sites holding memory at that peak ("mark" in
 * docs/snapshot-format.md).  Usage:
 *
 *     int m = cumemtrace_mark_begin();
 *     run_test();
 *     struct cumemtrace_usage u;
 *     if (cumemtrace_usage(0, &u) == 1 && u.peak_bytes - u.mark_bytes > budget)
 *         cumemtrace_dump("over-budget.json");   // has the sites to blame
 *     cumemtrace_mark_end(m);
 */

/* Figures of one device, bytes of device + managed + stream-ordered + VMM
 * physical memory (the device peak of the report; host-pinned memory for
 * device -1).  Without an active mark they cover the whole run. */
struct cumemtrace_usage {
    uint64_t current_bytes; /* held now */
    uint64_t mark_bytes;    /* held when the innermost mark was set */
    uint64_t peak_bytes;    /* highest held since that mark (>= mark_bytes) */
    int64_t mark_time_ns;   /* when the mark was set, ns since the process
                               started (0 without a mark) */
    int64_t peak_time_ns;   /* when peak_bytes was first reached */
};

/* Starts a mark: the peak since it restarts from what is held now.  Returns
 * its depth (1 for the outermost), to be passed to cumemtrace_mark_end, or
 * -1 after printing why (more than CUMEMTRACE_MARK_DEPTH nested marks,
 * tracing disabled).  */
#define CUMEMTRACE_MARK_DEPTH 16
int cumemtrace_mark_begin(void);

/* Ends the innermost mark, which must be `depth`: the enclosing mark (or the
 * whole run) takes over, its peak the higher of its own and the inner one's.
 * Returns 0, or -1 after printing why (not the innermost mark). */
int cumemtrace_mark_end(int depth);

/* Fills *out for `device` (an ordinal, or -1 for host-pinned memory).
 * Returns 1, 0 when that device saw no allocation yet (*out is then all
 * zero but for the mark's time), or -1 for an ordinal out of range
 * (0..63).  Thread-safe; costs one lock, no allocation. */
int cumemtrace_usage(int device, struct cumemtrace_usage *out);

/* ---- a caching allocator's own view, at its out-of-memory ----
 *
 * A caching allocator (PyTorch's; cumemtrace's Python layer calls this from
 * PyTorch's out-of-memory observer, src/torchboot/cumemtrace_torch.py) hands
 * its figures for the failing request; the library writes them into that
 * request's post-mortem as `oom.allocator` (docs/snapshot-format.md) and
 * names the cause in the allocator's terms.  When the calling thread has
 * no failed CUDA request open on that device (the allocator refused by
 * itself, e.g. PyTorch's set_per_process_memory_fraction), a post-mortem is
 * written for the refusal.  Any field may be -1 (unknown); strings may be
 * NULL.  Call it outside the allocator's own locks. */
/* Live tensors allocated from the same Python lines (PyTorch's history). */
struct cumemtrace_tensor_site {
    const char *stack; /* Python frames, innermost first, one per line, each
                          "file:line:function" */
    int64_t bytes;     /* their blocks' bytes */
    int64_t count;     /* how many */
};

struct cumemtrace_allocator_facts {
    uint32_t size;            /* sizeof(struct cumemtrace_allocator_facts) */
    const char *name;         /* "pytorch" */
    const char *version;      /* the allocator's (framework's) version */
    const char *config;       /* its configuration as the user wrote it
                                 (PYTORCH_CUDA_ALLOC_CONF) */
    int64_t requested_bytes;  /* the request as the allocator rounded it */
    int64_t allocated_bytes;  /* held by live tensors */
    int64_t reserved_bytes;   /* held from the driver (segments) */
    int64_t active_bytes;     /* allocated + freed but still in use by streams */
    int64_t inactive_split_bytes; /* free pieces of split segments */
    int64_t largest_free_small_bytes; /* largest free block, small pool */
    int64_t largest_free_large_bytes; /* largest free block, large pool */
    int64_t segments;
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t limit_bytes;      /* the allocator's own cap (memory fraction) */
    int64_t device_total_bytes; /* as the allocator's observer was told */
    int64_t device_free_bytes;
    /* The Python lines holding the largest live tensors, largest first, when
     * the allocator records its own history (CUMEMTRACE_TORCH_HISTORY=1);
     * ntop_tensors is -1 when it does not.  The library keeps the first 5. */
    const struct cumemtrace_tensor_site *top_tensors;
    int64_t ntop_tensors;
    /* The most its tensors held at once (PyTorch's max_memory_allocated),
     * beside the peak of what it reserved from the driver. */
    int64_t peak_allocated_bytes;
    /* Whose allocated_bytes are (PyTorch's layer: each live block is given
     * the role of the tensor whose storage it is - a module's parameter or
     * buffer, a parameter's .grad, an optimizer's state - and the rest is
     * "other": activations kept for backward, inputs, temporaries).  They
     * sum to allocated_bytes; all -1 when not measured. */
    int64_t parameter_bytes;
    int64_t buffer_bytes;
    int64_t gradient_bytes;
    int64_t optimizer_state_bytes;
    int64_t other_tensor_bytes;
    const char *optimizers; /* the optimizers' class names, "AdamW" or
                               "AdamW, SGD"; NULL or "" for none */
    /* Training steps (the most optimizer.step() calls of any optimizer): at
     * an OOM the step under way (1 = the first), at other moments the steps
     * done; and the step during which the device's peak (cumemtrace_usage)
     * was reached.  -1 when unknown (no optimizer stepped). */
    int64_t step;
    int64_t peak_step;
};

/* Returns 0, or -1 (bad arguments, or tracing disabled).  Thread-safe. */
int cumemtrace_allocator_oom(int device, const struct cumemtrace_allocator_facts *facts);

/* The allocator's figures at a moment without a failure (cumemtrace's
 * Python layer reports them at interpreter exit): kept as the device's
 * latest `allocator` state in every later snapshot, so that memory live at
 * exit is split into what tensors hold (possible leaks) and the allocator's
 * cache.  Same fields and return values as cumemtrace_allocator_oom. */
int cumemtrace_allocator_state(int device, const struct cumemtrace_allocator_facts *facts);

/* Fresh figures at every dump: a layer living in CPython (cumemtrace's
 * PyTorch layer) registers `callable`, a Python callable taking no
 * argument (a PyObject *, ctypes.py_object), which reports the allocator's
 * current state through cumemtrace_allocator_state.  Before each signal,
 * periodic (CUMEMTRACE_INTERVAL) and API (cumemtrace_dump) snapshot the
 * library has it run: on the dumping thread when that thread holds the GIL
 * or is Python's main thread, else on the main thread through
 * Py_AddPendingCall, waiting at most 200 ms for it (the snapshot then says
 * the figures it holds are older: "allocator_refresh" in
 * docs/snapshot-format.md).  The callable must catch its own exceptions.
 * Call with the GIL held (ctypes.PyDLL); NULL (ctypes.py_object())
 * unregisters - do so from Python's atexit, while the interpreter is whole.
 * The library keeps a reference while registered.  Returns 0, or -1 without
 * the GIL, without a CPython the library can use, or with tracing disabled. */
int cumemtrace_allocator_refresher(void *callable);

/* ---- where the caching allocator's memory lies, at its out-of-memory ----
 *
 * Its segments (what it holds from the driver) and the blocks each is cut
 * into, as PyTorch's torch.cuda.memory._snapshot() lists them: the
 * post-mortem draws them beside the driver-level layout (oom.layout).  Call
 * it just before cumemtrace_allocator_oom, with `tag` equal to the facts'
 * num_ooms: the post-mortem whose facts carry the same num_ooms shows these
 * segments (a later OOM's segments never land in an earlier post-mortem).
 * The library copies what it keeps (at most 1024 segments and 16384 blocks;
 * the counts of the rest are kept).  Returns 0, or -1 (bad arguments, out of
 * memory, or tracing disabled).  Thread-safe. */
enum {
    CUMEMTRACE_BLOCK_FREE = 0,      /* PyTorch's "inactive": cached, free */
    CUMEMTRACE_BLOCK_ALLOCATED = 1, /* "active_allocated": a live tensor */
    CUMEMTRACE_BLOCK_PENDING = 2    /* "active_pending_free": freed, still
                                       in use by a stream */
};

struct cumemtrace_allocator_block {
    int64_t offset;   /* from the segment's address */
    int64_t size;
    int32_t state;    /* CUMEMTRACE_BLOCK_* */
    int32_t stack;    /* cumemtrace_allocator_layout: 1 + the index in its
                         `stacks` of the Python frames that allocated the
                         block, 0 none; ignored by cumemtrace_allocator_segments */
};

struct cumemtrace_allocator_segment {
    uint64_t address; /* device address of the segment */
    int64_t size;
    int32_t pool;     /* 0 small (<= 1 MiB requests), 1 large */
    uint32_t nblocks;
    const struct cumemtrace_allocator_block *blocks; /* by offset */
};

int cumemtrace_allocator_segments(int device, int64_t tag,
                                  const struct cumemtrace_allocator_segment *segments,
                                  uint32_t nsegments);

/* The same with the Python frames of the blocks (PyTorch's allocation
 * history): stacks[i] is "file:line:function" lines, innermost first, as in
 * cumemtrace_tensor_site, and a block's `stack` picks one.  `tag`
 * CUMEMTRACE_LAYOUT_STATE hands over the layout at a moment without a
 * failure (cumemtrace's Python layer: at interpreter exit, beside
 * cumemtrace_allocator_state): kept as the device's latest and written in
 * every later snapshot as devices[].allocator_segments; it never lands in a
 * post-mortem.  Kept of the stacks: 1 MiB of text; a block whose stack did
 * not fit has none.  Returns 0, or -1 (bad arguments - a block's stack past
 * nstacks among them -, out of memory, tracing disabled). */
#define CUMEMTRACE_LAYOUT_STATE (-1)
int cumemtrace_allocator_layout(int device, int64_t tag,
                                const struct cumemtrace_allocator_segment *segments,
                                uint32_t nsegments, const char *const *stacks,
                                uint32_t nstacks);

/* ---- phases: the program's own ranges (NVTX, PyTorch, yours) ----
 *
 * A phase is a named range a thread opens and closes; ranges nest, and
 * every allocation the thread makes meanwhile carries the innermost one
 * (and through it the path of enclosing ranges, e.g. "validation/step
 * 1200"): `cumemtrace report --by range` shows the peak's live bytes per
 * range, the timeline draws the ranges.  NVTX ranges arrive by themselves
 * (NVTX_INJECTION64_PATH, set by `cumemtrace run`) with source "nvtx";
 * these two calls push and pop a phase of any other source - "torch" for
 * PyTorch's forward/backward/optimizer phases.  Each source keeps its own
 * nesting on a thread: a pop closes the innermost open phase of `source`.
 * Callable through ctypes (char pointers, int results):
 *
 *     lib = ctypes.CDLL(None)   # the preloaded library
 *     lib.cumemtrace_phase_push(b"torch", b"forward")
 *     ...
 *     lib.cumemtrace_phase_pop(b"torch")
 *
 * `source` NULL or "" means "api".  Names longer than 127 bytes are cut;
 * past 16384 distinct paths new ones count under one overflow phase
 * (docs/snapshot-format.md, "phases").  Thread-safe; no lock on the
 * allocation path, and none shared with it here. */

/* Opens phase `name` of `source` on the calling thread.  Returns its
 * 0-based nesting level among the thread's open phases, or -1 when the
 * thread's state cannot be allocated. */
int cumemtrace_phase_push(const char *source, const char *name);

/* Closes the calling thread's innermost open phase of `source`.  Returns
 * the level it had, or -1 when none of `source` is open (an unbalanced
 * pop, counted in the snapshot). */
int cumemtrace_phase_pop(const char *source);

/* Who reached device `device`'s peak (all-time, not since a mark), for a
 * runtime layer that names the peak at a dump without hooking every call
 * (the PyTorch layer: a `self` of a running forward() is a module, a
 * thread named "pt_autograd_*" is autograd's backward): the allocating
 * thread's name, the first local of each of its Python frames and their
 * functions' co_name objects (CPython
 * 3.11-3.13 once its frames are read directly; nselves 0 otherwise),
 * innermost first - addresses, never dereferenced by the library; compare
 * them with id() of live objects only.  Returns 1, or 0 when the device
 * has no peak yet. */
#define CUMEMTRACE_PEAK_SELVES 32
struct cumemtrace_peak_context {
    int64_t peak_time_ns; /* the peak it belongs to (ns since start) */
    char thread[16];      /* NUL-terminated */
    uint32_t nselves;
    uint64_t selves[CUMEMTRACE_PEAK_SELVES];
    uint64_t names[CUMEMTRACE_PEAK_SELVES]; /* each frame's code's co_name
                                                object (an interned str) */
};
int cumemtrace_peak_context(int device, struct cumemtrace_peak_context *out);

/* Names that peak by phase `path` of `source` ("forward/Net/wide": names
 * from the root, '/' between them), as if it had been open then: only when
 * the device's peak is still the one of `peak_time_ns` and no phase was
 * open at it.  Returns 1 when set, 0 when not. */
int cumemtrace_peak_phase(int device, int64_t peak_time_ns, const char *source,
                          const char *path);

/* Takes phase `name` of `source` off that peak's phase where it is the
 * innermost one (repeated: each such one in a row), for a layer that finds
 * it had ended by then though it was never popped (PyTorch's optimizer
 * step that raised: no post hook runs); the peak then carries the phase
 * around it.  Only when the device's peak is still the one of
 * `peak_time_ns`.  Returns 1 when changed, 0 when not. */
int cumemtrace_peak_phase_ended(int device, int64_t peak_time_ns, const char *source,
                                const char *name);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *cumemtrace_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMTRACE_H */
