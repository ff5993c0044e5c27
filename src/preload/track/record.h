/* record.h - the tracker: live allocations, deduplicated stacks, per-device
 * counters and exact peak attribution.  Pure C, no CUDA: unit-testable alone
 * (tests/unit/test_record.c).  See record.c for the design and invariants.
 */
#ifndef CUMEMTRACE_RECORD_H
#define CUMEMTRACE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "record_event.h"
#include "settings.h"

/* Devices we keep counters for; an ordinal beyond this is folded into the
 * last slot with a warning (no machine has 64 GPUs in one process today). */
#define RECORD_MAX_DEVICES 64
/* Pool index of page-locked host memory; pools 0..63 are device ordinals. */
#define RECORD_HOST_POOL RECORD_MAX_DEVICES
#define RECORD_POOLS (RECORD_MAX_DEVICES + 1)
/* Deepest native stack we store: the most CUMEMTRACE_DEPTH accepts. */
#define RECORD_MAX_DEPTH SETTINGS_DEPTH_MAX

enum record_kind {
    /* KIND_DEVICE: cudaMalloc, cuMemAlloc, pitch, 3D; KIND_MANAGED:
     * cudaMallocManaged, cuMemAllocManaged; KIND_ASYNC: stream-ordered
     * pools; KIND_VMM: physical memory of cuMemCreate handles;
     * KIND_HOST_PINNED: page-locked host memory (format.h's table) */
#define RECORD_KIND_ENUM(sym, name, on_device, with_context, placed, phrase) KIND_##sym,
    FORMAT_KINDS(RECORD_KIND_ENUM)
#undef RECORD_KIND_ENUM
    KIND_COUNT
};

const char *record_kind_name(enum record_kind kind);

/* Counters of one kind within one pool. */
struct record_kind_stats {
    uint64_t current;  /* bytes held now */
    uint64_t peak;     /* max of current */
    int64_t peak_time; /* ns since start when peak was first reached */
    uint64_t allocs, frees, failures;
};

/* Virtual-memory bookkeeping of one device (cuMemAddressReserve/cuMemMap). */
struct record_vmm_stats {
    uint64_t reserved, reserved_peak; /* address space, not memory */
    uint64_t mapped, mapped_peak;     /* bytes of handles mapped into it */
};

/* A deduplicated call stack.  Immutable once created and never freed while
 * the process lives, so a dump may read it without the lock. */
struct record_stack {
    uint32_t id;      /* 1-based, dense: the id written to snapshots */
    uint16_t depth;   /* number of frames */
    uint16_t entry;   /* which CUDA entry point (hooks' slot number) */
    void *frames[];   /* return addresses, innermost first */
};

/* What one stack holds in one pool (device or host).  `at_peak` and
 * `at_peak_count` are valid only when `epoch` equals the pool's epoch; see
 * the peak-attribution comment in record.c. */
struct record_site {
    /* What every allocation and free here writes, first: one cache line
     * (record_impl.h aligns sites to lines). */
    uint64_t current, count;
    uint64_t epoch, mark_epoch; /* see at_peak, mark_at_peak */
    /* Churn over the run: allocations and frees made here, the bytes
     * allocated in all, and frees that came straight after their own
     * allocation with no other allocation between (heaptrack's
     * "temporary"). */
    uint64_t allocs, frees, alloc_bytes, temporary;
    struct record_stack *stack;
    uint64_t at_peak, at_peak_count;
    /* The same scheme for the peak since the latest mark (record_mark). */
    uint64_t mark_at_peak, mark_at_peak_count;
    uint32_t pool;
    /* The program's phase (phases.h) its allocations were made in, 0 for
     * none: a stack allocating in two phases has a site in each, so the
     * peak's bytes per phase come from the same epochs as per stack. */
    uint32_t phase;
    uint8_t kind;
};

_Static_assert(RECORD_EVENT_POOLS == RECORD_POOLS, "an event row names every pool");

/* A live allocation as the hooks describe it. */
struct record_alloc {
    uintptr_t addr;      /* device pointer, host pointer or VMM handle */
    uint64_t size;       /* bytes charged (pitch*height for pitched) */
    uint64_t requested;  /* bytes the caller asked for */
    enum record_kind kind;
    int device;          /* ordinal; for KIND_HOST_PINNED the device whose
                            context made it, -1 unknown */
    bool is_handle;      /* a cuMemCreate handle: refcounted, see VMM */
    uint16_t ctx;        /* the context that owns it: 0 = `device`'s primary
                            context, n = created context n (record_drop_context) */
    uint32_t phase;      /* the allocating thread's phase (phases.h), 0 none */
};

/* Created contexts (cuCtxCreate) the tracker numbers, alive at once; the
 * allocations of any further one are owned by RECORD_CONTEXT_OVERFLOW, and
 * its destroy names them by address (record_drop_entries). */
#define RECORD_MAX_CONTEXTS 958
#define RECORD_CONTEXT_OVERFLOW (RECORD_MAX_CONTEXTS + 1)

/* Snapshot of the process-wide counters. */
struct record_counters {
    uint64_t unknown_frees; /* frees of addresses never seen allocated */
    uint64_t wrong_kind_frees; /* a live allocation freed with another
                                  kind's API (cudaFree on pinned host memory,
                                  cudaFreeHost on device memory) */
    uint64_t reentrant_untracked; /* calls a signal handler made while its
                                     thread was in our bookkeeping: passed
                                     through, not tracked */
    uint64_t failed_frees;  /* real frees that failed (entry kept) */
    uint64_t stacks;
    uint64_t live; /* live entries: set in a view only, from the address
                      tables' counts (record_view.c) */
};

/* Initialises the tracker; event_cap is the event-log bound (0 = no log).
 * Events and peaks take the callers' now_ns, made non-decreasing under the
 * lock so that the log is in time order; `clock` (may be NULL) re-stamps
 * only a caller that was preempted between its reading and the lock (see
 * event_log_stamp): no clock is read inside the critical section otherwise.
 * Safe to call once before any other function. */
void record_init(size_t event_cap, int64_t (*clock)(void));

/* A free within window_ns of its allocation counts as temporary too (0:
 * only a free with no allocation in between does, heaptrack's rule).  Set
 * once, after record_init, before any allocation. */
void record_set_temporary(int64_t window_ns);

/* Returns the stack for (entry, frames[0..depth)), creating it if new; NULL
 * only when memory is exhausted (the allocation is then still counted, under
 * a shared "unknown" stack).  Takes the lock briefly. */
struct record_stack *record_stack_intern(unsigned entry, void *const *frames,
                                         unsigned depth);

/* Records a successful allocation made at `stack` (may be NULL). */
void record_alloc(const struct record_alloc *a, struct record_stack *stack,
                  int64_t now_ns);
/* The same, interning the stack (entry, frames) in the same critical
 * section: the allocation path's single trip through the lock. */
void record_alloc_at(const struct record_alloc *a, unsigned entry,
                     void *const *frames, unsigned depth, int64_t now_ns);

/* Frees are two-phase so the address cannot be reused by another thread
 * between our bookkeeping and the driver's: take the entry out (and account
 * the free) before the real free, then finish with the real result - which
 * on success needs no lock.  record_free_take returns an opaque token, or
 * NULL when the address was never seen (counted as unknown).
 * `kind_hint`: if not KIND_COUNT, an entry of another kind is left alone
 * (returns NULL, counted as a wrong-kind free; the driver refuses such a
 * call): KIND_HOST_PINNED takes only host-pinned entries, KIND_DEVICE only
 * device-side ones (device, managed, async). */
void *record_free_take(uintptr_t addr, enum record_kind kind_hint,
                       int64_t now_ns);
/* ok=true: the memory is gone; ok=false: the real free failed, put the
 * entry and the counters back as they were.  `token` may be NULL (no-op). */
void record_free_finish(void *token, bool ok, int64_t now_ns);
/* Size of a taken entry. */
uint64_t record_token_size(const void *token);
/* Id of the stack that allocated a taken entry. */
uint32_t record_token_stack(const void *token);

/* A context was destroyed with its memory: ctx 0 is `device`'s primary
 * context (cudaDeviceReset, cuDevicePrimaryCtxReset, the last
 * cuDevicePrimaryCtxRelease), n the created context n (cuCtxDestroy).  Its
 * linear, managed and host-pinned allocations are forgotten, as frees.
 * Stream-ordered (pool) and VMM memory belong to no context (NVIDIA's
 * cuCtxDestroy documentation) and stay.  Returns the bytes forgotten. */
uint64_t record_drop_context(int device, unsigned ctx, int64_t now_ns);

/* An allocation made in a context past the numbered ones: its address, and
 * a time read after it was recorded (a later allocation at the same
 * address, made after a free, is newer). */
struct record_owned {
    uintptr_t addr;
    int64_t t_upper;
};
/* The driver destroyed such a context: forgets each of v[0..n) still live,
 * owned by RECORD_CONTEXT_OVERFLOW and recorded no later than its t_upper
 * (not async or VMM memory), as frees at now_ns.  Returns the bytes. */
uint64_t record_drop_entries(const struct record_owned *v, size_t n, int64_t now_ns);

/* Counts an allocation or free passed through untracked because it came
 * from a signal handler that interrupted this library on the same thread.
 * Lock-free: async-signal-safe. */
void record_count_reentrant(void);

/* The calling thread ends: its spare entries go back to the free list. */
void record_thread_end(void);

/* This thread's id, asked once (kept in record_tc; a fork child's tracker
 * forgets it). */
uint32_t record_current_tid(void);

/* Counts a failed allocation attempt of `kind` on `device`. */
void record_failure(enum record_kind kind, int device);

/* VMM: reservations, mappings and handle references (see hooks_vmm.c). */
void record_vmm_reserve(int device, uintptr_t addr, uint64_t size);
void record_vmm_unreserve(uintptr_t addr);
void record_vmm_map(uintptr_t addr, uint64_t size, uintptr_t handle);
void record_vmm_unmap(uintptr_t addr, uint64_t size);
/* Adds a reference to a tracked cuMemCreate handle; false if unknown. */
bool record_vmm_retain(uintptr_t handle);
/* Drops a reference; returns a free token (see record_free_take) when this
 * was the last one, NULL otherwise or when the handle is unknown. */
void *record_vmm_release(uintptr_t handle, int64_t now_ns);

/* Memory limit (CUMEMTRACE_LIMIT): 0 = none. */
void record_set_limit(int device, uint64_t bytes);
uint64_t record_limit(int device);
/* Reserves `bytes` against the device's limit before the real call; false if
 * the request would exceed it.  Always true without a limit.  Every true
 * return must be matched by record_limit_settle() after the call. */
bool record_limit_reserve(int device, uint64_t bytes);
void record_limit_settle(int device, uint64_t bytes);

/* Tracked bytes of a pool right now (device: device+managed+async+vmm). */
uint64_t record_current(int pool);
/* The same per kind (pool: a device ordinal, or -1 for host-pinned):
 * O(1), unlike record_view_take (an OOM retry loop asks at every attempt). */
void record_pool_kinds(int pool, uint64_t out[KIND_COUNT]);

/* Allocations, frees and failures counted so far, whatever the event log
 * keeps: whether anything moved since an earlier reading. */
uint64_t record_activity(void);
/* Allocations and failed allocations so far, all pools: what a host's
 * teardown, which only frees, leaves unchanged. */
uint64_t record_allocations(void);

/* Remembers the driver's latest (free, total) for a device. */
void record_meminfo(int device, uint64_t free_bytes, uint64_t total_bytes);

/* ---- marks: the peak since a moment (cumemtrace_mark_begin, mark.c) ----
 * Each pool keeps, beside its all-time peak, the peak since its latest mark,
 * maintained by the same compare on every allocation (O(1) per event) and
 * attributed to sites by the same epoch scheme.  Nesting is the caller's:
 * record_mark_set hands back the state it replaced, record_mark_restore
 * puts it back, folding in what happened meanwhile. */
struct record_mark {
    uint64_t base;      /* the pool's current bytes when the mark was set */
    uint64_t peak;      /* max of current since then (>= base) */
    int64_t time;       /* when the mark was set, ns since start */
    int64_t peak_time;  /* when `peak` was first reached */
    uint64_t epoch;     /* bumped by each new mark peak; never goes back */
    bool sites_valid;   /* the sites' mark_at_peak add up to `peak` */
};

/* Marks every pool now; saved[] receives the marks it replaces.  The
 * tracker counts the marks set and not yet restored (record_view's
 * mark_depth), so the snapshot writer learns the depth from its view. */
void record_mark_set(struct record_mark saved[RECORD_POOLS], int64_t now_ns);
/* Ends the marks set by the record_mark_set that returned saved[]: each
 * pool's mark becomes the saved one, with the peak since then the higher of
 * the two (exact).  Sites stay attributed when the inner peak was higher;
 * otherwise the outer mark's sites are lost until its next new peak. */
void record_mark_restore(const struct record_mark saved[RECORD_POOLS]);
/* A pool's mark and current bytes (pool as for record_current); returns
 * whether the pool saw any activity. */
bool record_mark_get(int pool, struct record_mark *m, uint64_t *current);

/* ---- the peak's context (record_peak.c) ---- */

/* First locals of the peak's Python frames kept (innermost first). */
#define RECORD_PEAK_SELVES 32

struct record_peak_context {
    int64_t peak_time;   /* the peak it belongs to (record_pool_view's) */
    char thread[16];     /* the allocating thread's name (PR_GET_NAME) */
    unsigned nselves;
    uintptr_t selves[RECORD_PEAK_SELVES]; /* python_selves (python.h) */
    uintptr_t names[RECORD_PEAK_SELVES];  /* their frames' co_name objects */
};

/* Set at start-up (init.c) when Python frames are read: the calling thread's latest
 * capture's first locals and code names (python_selves); NULL: none. */
extern unsigned (*record_peak_selves)(uintptr_t *selves, uintptr_t *names, unsigned max);

/* The context of device `device`'s peak; false before it has one. */
bool record_peak_context(int device, struct record_peak_context *out);

/* Names device `device`'s peak by `phase` (phases.h), found later (the
 * PyTorch layer, from the context): only when that peak (peak_time) still
 * is the device's and carries no phase of its own.  True when set. */
bool record_peak_phase_name(int device, int64_t peak_time, uint32_t phase);
/* Replaces the phase of that peak (when it has one) by replace(phase,
 * arg), under the lock; returns whether it changed. */
bool record_peak_phase_swap(int device, int64_t peak_time,
                            uint32_t (*replace)(uint32_t, const void *), const void *arg);

/* ---- dump support: a consistent copy taken under the lock ---- */

struct record_pool_view {
    bool active;                /* any activity at all */
    uint64_t current, peak;
    int64_t peak_time;
    uint32_t peak_phase;        /* phase of the allocation that first reached
                                   `peak` (phases.h), 0 none */
    uint64_t limit;
    int64_t free_bytes, total_bytes; /* -1 when never seen */
    struct record_kind_stats kinds[KIND_COUNT];
    struct record_vmm_stats vmm;
    /* histogram of live sizes: bucket b holds sizes in (2^(b-1), 2^b] */
    uint64_t hist_count[65], hist_bytes[65];
    uint64_t requested, rounded, small_count, small_bytes;
    struct record_mark mark;
};

struct record_site_view {
    struct record_stack *stack;
    uint32_t pool;
    uint32_t phase;                  /* in `phased` only; 0 in `sites` */
    uint8_t kind;
    uint64_t current, count;         /* live now */
    uint64_t at_peak, at_peak_count; /* held at the pool's peak */
    uint64_t mark_at_peak, mark_at_peak_count; /* at the peak since the mark */
    uint64_t allocs, frees, alloc_bytes, temporary; /* churn, see record_site */
};

struct record_view {
    struct record_pool_view pools[RECORD_POOLS];
    /* One per (stack, pool, kind), in stack id order, the phases' sites
     * added up: what the live, at_peak and churn groups list. */
    struct record_site_view *sites;
    size_t nsites;
    /* Every site with its phase, when some site has one (else NULL, 0):
     * what the per-phase groups add up. */
    struct record_site_view *phased;
    size_t nphased;
    struct record_stack **stacks; /* index id-1 */
    size_t nstacks;
    struct record_event *events;
    size_t nevents;
    uint64_t events_recorded;
    uint64_t event_bucket_ns; /* 0: every event kept; else thinned, see event_log.c */
    size_t event_cap;
    struct record_counters counters;
    int mark_depth; /* record_mark_set calls not yet restored (0: no mark) */
};

/* Fills *v with a consistent copy (allocated; free with record_view_free).
 * Returns 0, or -1 when memory is exhausted. */
int record_view_take(struct record_view *v);

/* A stream's place in the event log.  Its checkpoints need only the rows
 * that the previous ones did not write ({0, 0}: every row the log holds),
 * and the view itself then holds no row (events NULL; nevents,
 * events_recorded and the rest as ever).  They come in chunks of at most
 * RECORD_ROWS_CHUNK rows into rows[0..nrows): the first with the view, the
 * next from record_rows_more, each under the lock, while the log is not
 * thinned (so its rows are only ever appended); a thinned log's come at
 * once.  rows is the caller's, kept from one checkpoint to the next (cap
 * rows, grown with realloc; the caller frees it): a copy of the whole log,
 * or a fresh buffer of a second's rows, page-faulted most of the writer
 * thread's CPU at 160,000 events/s, the copy under the tracker's lock. */
#define RECORD_ROWS_CHUNK 16384
struct record_rows {
    uint64_t recorded; /* events_recorded as of the last row handed out */
    int64_t last_t_ns; /* the last row handed out */
    struct record_event *rows;
    size_t nrows;
    size_t cap;
    /* the view's rows not handed out yet: [next, end) of the log, which
     * had recorded_end events then */
    size_t next, end;
    uint64_t recorded_end;
};
/* record_view_take, with the first chunk of the new rows into *fresh
 * instead of every row into the view (fresh NULL: record_view_take). */
int record_view_take_fresh(struct record_view *v, struct record_rows *fresh);
/* The next chunk into rows[0..nrows); false when none is left (or the log
 * was thinned since the view: the next view takes up from the last row
 * handed out). */
bool record_rows_more(struct record_rows *fresh);
/* Rows the view had that are not handed out yet, beside rows[0..nrows). */
static inline size_t record_rows_left(const struct record_rows *fresh)
{
    return fresh->end - fresh->next;
}
void record_view_free(struct record_view *v);

/* A live allocation's address range (layout.c). */
struct record_range {
    uintptr_t addr;
    uint64_t size;     /* bytes charged */
    uint32_t stack;    /* allocating stack id, 0 unknown */
    uint8_t kind;      /* a kind the driver places (FORMAT_KIND_PLACED) */
};

/* Copies the ranges of `device`'s live allocations the driver placed at an
 * address of its choosing (format.h's `placed` column: device and async; not
 * managed or VMM memory, whose pages need no contiguity) into *out (malloc'd, unsorted, NULL when
 * none).  Returns their number, or -1 when memory is exhausted.  O(live
 * allocations) under the lock: for post-mortems, not the hot path. */
long record_live_ranges(int device, struct record_range **out);

/* Allocation granularity used for the "rounded" fragmentation figure. */
#define RECORD_GRANULARITY (2u << 20)

/* fork(): prepare takes the lock, parent releases it, child resets every
 * table to empty (the child did not allocate the parent's memory). */
void record_atfork_prepare(void);
void record_atfork_parent(void);
void record_atfork_child(void);

#endif
