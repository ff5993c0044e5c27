/* oom.h - out-of-memory post-mortems and retry chains. */
#ifndef CUMEMTRACE_OOM_H
#define CUMEMTRACE_OOM_H

#include <stdbool.h>
#include <stdint.h>

#include "allocator.h"
#include "record.h"

/* One out-of-memory event: the first failure of a chain of retries of the
 * same request on one thread, updated by each further attempt. */
struct oom_info {
    uint64_t requested;
    enum record_kind kind;
    int device;              /* -1 for host-pinned */
    unsigned slot;           /* entry point */
    uint32_t tid;
    int64_t time_ns;
    uint32_t stack;          /* stack id */
    int64_t free_bytes, total_bytes; /* real cuMemGetInfo; -1 unknown */
    uint64_t limit;          /* CUMEMTRACE_LIMIT in force, 0 none */
    uint64_t tracked;        /* this process on that device */
    uint64_t by_kind[KIND_COUNT];
    uint64_t untracked;      /* total - free - tracked, floored at 0 */
    const char *cause;       /* "limit", "fragmentation", "exhausted" */
    uint64_t shortfall;
    unsigned attempts;
    bool recovered;
    uint64_t released_bytes, released_count;
    /* what the retries released, by allocating stack (the caching
     * allocator's segments); the 16th slot gathers any further stacks */
    struct {
        uint32_t stack;
        uint64_t bytes, count;
    } released_by[16];
    unsigned nreleased_by;
    bool open;               /* a retry may still extend this chain */
    bool reported;           /* within CUMEMTRACE_MAX_OOM_DUMPS: printed */
    bool said;               /* its stderr lines are out (at its failed end) */
    uint32_t chain;          /* 1-based chain number in the process */
    uint32_t postmortem;     /* 1-based number of its written post-mortem
                                (oom.c keeps a copy there), 0 none */
    bool has_allocator;      /* the caching allocator spoke (allocator) */
    bool by_allocator;       /* refused by the allocator: no CUDA call failed */
    struct allocator_facts allocator;
    char path[4096];         /* post-mortem file, "" if not written */
};

/* One failed attempt, or the success that ended a chain (the timeline's
 * out-of-memory, retry and recovery instants). */
struct oom_attempt {
    int64_t t_ns;
    uint64_t requested;
    int32_t device;
    uint32_t chain;   /* 1-based OOM chain number */
    uint16_t attempt; /* 1 = the first failure */
    uint8_t recovered;
};

#define OOM_ATTEMPTS_KEPT 256 /* the first ones; later ones are counted */

/* Process-wide OOM totals for every snapshot. */
struct oom_summary {
    uint64_t count, failed_attempts, recovered, retry_released_bytes;
    uint64_t suppressed; /* post-mortems not written: CUMEMTRACE_MAX_OOM_DUMPS */
    unsigned ndumps;
    char dumps[8][1024]; /* the first 8 post-mortem files */
    unsigned nattempts;
    struct oom_attempt attempts[OOM_ATTEMPTS_KEPT];
};

/* Called by the hooks; cheap unless the calling thread has an open chain. */
void oom_on_failure(unsigned slot, enum record_kind kind, int device,
                    uint64_t requested, bool by_limit,
                    struct record_stack *stack, int64_t now);
void oom_on_success(enum record_kind kind, int device, uint64_t requested,
                    int64_t now);
void oom_on_free(uint64_t bytes, uint32_t stack);

/* A caching allocator's figures for its OOM on `device` (allocator.c):
 * attached to the calling thread's open chain on that device, whose
 * post-mortem is rewritten; with no such chain (the allocator refused by
 * itself) a post-mortem is written for the refusal. */
void oom_on_allocator(int device, const struct allocator_facts *f, int64_t now);

void oom_summary_get(struct oom_summary *out);
/* Before the exit snapshot: rewrites each post-mortem whose chain moved on
 * since its last write (a retry loop still running, a chain never closed),
 * and says in one line how many failures went unreported.  No CUDA calls. */
void oom_at_exit(int64_t now);
void oom_atfork_child(void);
/* The calling thread ends: its chain state is freed (hooks_common.c). */
void oom_thread_end(void);

#endif
