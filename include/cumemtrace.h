/* cumemtrace.h - the public API of libcumemtrace.so.
 *
 * Nothing here is needed to trace a program: LD_PRELOAD the library and every
 * CUDA allocation is recorded.  These functions let a program that knows it
 * runs under cumemtrace ask for a snapshot at a moment of its choosing (after
 * the first training step, before a checkpoint).  Resolve them with
 * dlsym(RTLD_DEFAULT, "cumemtrace_dump") so the program still runs without
 * the library.  The library exports a few more cumemtrace_* symbols: those
 * only cumemtrace's own PyTorch layer calls, not part of this API.
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
 * PyTorch process it first has cumemtrace's PyTorch layer report its
 * current figures (on this thread when it holds the GIL or is Python's main
 * thread, e.g. called through ctypes; else waiting at most 200 ms for the
 * main thread).  An
 * existing file is never overwritten: a free name "<path>.<n>" is used.
 * Returns 0, or -1 after printing why on stderr (unwritable path, tracing
 * disabled), or -1 without a word while a termination signal ends the
 * process (its own snapshot is being written).  Thread-safe. */
int cumemtrace_dump(const char *path);

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

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *cumemtrace_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMTRACE_H */
