/* phases.h - the program's own phases: named ranges it opens and closes
 * (NVTX ranges through nvtx.c, PyTorch's forward/backward/optimizer through
 * cumemtrace_phase_push/pop), kept per thread as a stack (phases.c).
 *
 * A phase is a node of a tree: (parent node, source/domain, name).  Its id
 * is what an allocation carries (the tracker's site is keyed by it,
 * record.h), so the path of ranges open at an allocation is the chain of
 * parents.  Ids are dense from 1; 0 is "outside every range"; id 1 is the
 * overflow phase that gathers ranges whose path was new once
 * PHASE_MAX_NODES paths were known.
 */
#ifndef CUMEMTRACE_PHASES_H
#define CUMEMTRACE_PHASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "thread_hot.h"

/* Distinct paths kept: with names of at most PHASE_NAME_MAX bytes the
 * table stays under 3 MiB whatever the program names (the budget asks for
 * 100,000 distinct names in bounded memory). */
#define PHASE_MAX_NODES 16384
/* Bytes of a name kept; a longer name is cut (at a UTF-8 boundary). */
#define PHASE_NAME_MAX 127
/* Ranges a thread keeps open and attributes; deeper ones are counted
 * (phase_stats.too_deep) and popped, but do not become the phase. */
#define PHASE_MAX_DEPTH 64
/* Sources and NVTX domains told apart; later ones share the last. */
#define PHASE_MAX_DOMAINS 256
/* Start/end ranges open at once (nvtxRangeStart...); more are dropped. */
#define PHASE_MAX_OPEN 4096
/* Closed ranges kept for the timeline: the latest ones (32 B each). */
#define PHASE_RING 65536

#define PHASE_NONE 0
#define PHASE_OVERFLOW 1

/* The calling thread's innermost phase (0: none): what its next allocation
 * carries.  Written by this thread's push/pop and, under its lock, by a
 * thread ending a range this one started; read with a relaxed load.  It
 * is phase_current, a member of the thread's hot TLS block (thread_hot.h). */
static inline uint32_t phase_now(void)
{
    return __atomic_load_n(&phase_current, __ATOMIC_RELAXED);
}

/* A domain: who names the ranges ("nvtx", "torch", any API source) and,
 * for NVTX, the domain's own name (NULL: the default domain). */
struct phase_domain;

/* The domain of `source` (and NVTX `name`, may be NULL), created on first
 * use; NULL only with PHASE_MAX_DOMAINS already made (then the last is
 * shared).  Takes the module's lock: call it once per domain, not per
 * range. */
struct phase_domain *phase_domain(const char *source, const char *name);

/* A registered string (nvtxDomainRegisterStringA): copied once. */
struct phase_name {
    uint32_t len;
    char s[PHASE_NAME_MAX + 1];
};
/* NULL when out of memory or past PHASE_MAX_NODES registrations. */
const struct phase_name *phase_intern_name(const char *s, size_t len);

/* Opens a range named name[0..len) on the calling thread.  Returns its
 * 0-based level (NVTX's nvtxRangePush result), or -1 when the thread's
 * block cannot be allocated. */
int phase_push(struct phase_domain *d, const char *name, size_t len);
/* The same for a NUL-terminated name (NULL: ""), cheaper when the thread
 * pushed the same string from the same place before. */
int phase_push_str(struct phase_domain *d, const char *name);
/* Closes the calling thread's innermost range of domain `d`.  Returns the
 * level it had, or -1 when none of `d` is open (counted as unbalanced). */
int phase_pop(struct phase_domain *d);

/* The node of `path` ("forward/Net/wide": names under `d`, from the root;
 * a name holds no '/'), made if new, with no range opened: a phase found
 * after the fact (the PyTorch layer names a peak at a dump).  PHASE_NONE
 * for an empty path or no memory. */
uint32_t phase_path(struct phase_domain *d, const char *path);

/* A start/end range (may end on another thread): returns its id, 0 when
 * PHASE_MAX_OPEN are open already (counted as dropped). */
uint64_t phase_start(struct phase_domain *d, const char *name, size_t len);
void phase_end(uint64_t id);
/* An instant (nvtxMarkA): logged for the timeline, no phase change. */
void phase_mark(struct phase_domain *d, const char *name, size_t len);

/* ---- what a snapshot reads (serialise.c) ---- */

struct phase_info {
    uint32_t id, parent;
    const char *name;   /* NUL-terminated, lives as long as the process */
    const char *source; /* "nvtx", "torch", ... */
    const char *domain; /* NVTX domain name, NULL for none */
};

struct phase_stats {
    uint64_t pushes;          /* ranges opened (push and start) */
    uint64_t overflow;        /* of them, counted under PHASE_OVERFLOW */
    uint64_t unbalanced_pops; /* pops/ends with no matching open range */
    uint64_t too_deep;        /* pushes beyond PHASE_MAX_DEPTH on a thread */
    uint64_t dropped_starts;  /* starts beyond PHASE_MAX_OPEN open */
    uint64_t recorded;        /* closed ranges and marks logged in all */
};

/* Number of phase ids in use (the highest id); 0 when no range was ever
 * opened in this process. */
uint32_t phase_count(void);
/* Fills *out for id 1..phase_count(); false for an unknown id. */
bool phase_get(uint32_t id, struct phase_info *out);
void phase_get_stats(struct phase_stats *out);

enum phase_range_kind { PHASE_RANGE_PUSH, PHASE_RANGE_STARTEND, PHASE_RANGE_MARK };

struct phase_range {
    int64_t start_ns, end_ns; /* end_ns -1: still open at the dump */
    uint32_t phase;
    uint32_t tid;             /* the thread that opened it */
    uint8_t kind;             /* enum phase_range_kind */
};

/* Copies the kept ranges (time order of their end), then the ranges still
 * open on every thread, into *out (malloc'd; NULL when none).  Returns
 * their number, or -1 when memory is exhausted. */
long phase_ranges(struct phase_range **out);

/* fork(): prepare takes the module's lock, parent gives it back; the
 * child keeps only the forking thread's ranges and an empty log. */
void phase_atfork_prepare(void);
void phase_atfork_parent(void);
void phase_atfork_child(void);

#endif
