/* torch_protocol.h - entry points only cumemtrace's own PyTorch layer
 * (src/torchboot) calls, through ctypes.  Not the user's API
 * (include/cumemtrace.h, the one installed header): their shape follows the
 * layer, which ships with this library, and may change with it.  Exported
 * by exports.map.in; declared here for the library's own files and its unit
 * tests.  The layer's ctypes structures (src/torchboot/layer/library.py,
 * phases.py) mirror the structures below field by field. */
#ifndef CUMEMTRACE_TORCH_PROTOCOL_H
#define CUMEMTRACE_TORCH_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

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
     * the allocator records its own history (the layer turns it on unless
     * CUMEMTRACE_TORCH_HISTORY=0 or the program set its own); ntop_tensors
     * is -1 when it does not.  The library keeps the first 5. */
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
     * was reached (cumemtrace_step_end).  -1 when unknown (no optimizer stepped). */
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
    int32_t stack;    /* 1 + the index in `stacks` of the Python frames
                         that allocated the block, 0 none */
};

struct cumemtrace_allocator_segment {
    uint64_t address; /* device address of the segment */
    int64_t size;
    int32_t pool;     /* 0 small (<= 1 MiB requests), 1 large */
    uint32_t nblocks;
    const struct cumemtrace_allocator_block *blocks; /* by offset */
};

/* The Python frames of the blocks (PyTorch's allocation history): stacks[i] is "file:line:function" lines, innermost first, as in
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

/* PyTorch's live tensors grouped by the user's line, handed over as JSON
 * text: one object whose members are among "tensors", "peak_tensors",
 * "growth" and "tensor_series" (docs/snapshot-format.md, devices[]) and,
 * at an OOM, "origin" (the failing request's autograd node,
 * oom.allocator.origin), each at most once.  `tag`
 * as cumemtrace_allocator_layout's: CUMEMTRACE_LAYOUT_STATE (-1) for the
 * device's latest state, written as devices[].tensors/peak_tensors/growth/tensor_series
 * in every later snapshot; or an OOM's num_ooms, whose post-mortem writes
 * the object's "tensors" and "origin" as oom.allocator.tensors and
 * oom.allocator.origin.  The library copies the
 * text (at most TORCH_TENSORS_MAX bytes) and writes each member verbatim,
 * so it refuses anything that is not one well-formed JSON object of valid
 * UTF-8 nested at most 64 deep.  Returns 0, or -1 (bad arguments, a text
 * refused, out of memory, tracing disabled).  Thread-safe. */
#define TORCH_TENSORS_MAX (16u << 20)
int cumemtrace_allocator_tensors(int device, int64_t tag, const char *json, size_t len);

/* Now on the snapshots' clock (ns since the library loaded, as every
 * *_time_ns of a snapshot): the layer times its readings of PyTorch's
 * tensors between dumps with it (devices[].tensor_series).  Thread-safe,
 * async-signal-safe. */
int64_t cumemtrace_clock_ns(void);

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

/* The end of a training step, from the layer's optimizer post hook: one
 * call where a pop and a reading of each device's usage were.  Pops the
 * calling thread's innermost phase of `source` when `pop`; when `step` > 0
 * (the most steps any optimizer took grew to it), notes, for each device
 * below `devices` whose peak moved since the last step noted, that it was
 * reached in `step`.  Returns what the pop returned, or 0. */
int cumemtrace_step_end(const char *source, int pop, int step, int devices);

/* The step noted for `device`'s peak (above) and, in *peak_time_ns, the
 * peak's time then; -1 when none was noted. */
int cumemtrace_peak_step(int device, int64_t *peak_time_ns);

#endif
