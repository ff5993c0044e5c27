/* oom_ledger.h - what the process knows of its out-of-memory failures:
 * each chain's record (struct oom_info), the process's totals and attempt
 * log (struct oom_summary).  Written by oom.c, which decides what to dump;
 * read by the serialiser (serialise.c) and the stream.  oom_ledger.c. */
#ifndef CUMEMTRACE_OOM_LEDGER_H
#define CUMEMTRACE_OOM_LEDGER_H

#include <stdbool.h>
#include <stdint.h>

#include "allocator.h"
#include "format.h"
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
    uint32_t phase;          /* the failing thread's phase (phases.h), 0 none */
    int64_t free_bytes, total_bytes; /* real cuMemGetInfo; -1 unknown */
    uint64_t limit;          /* CUMEMTRACE_LIMIT in force, 0 none */
    uint64_t tracked;        /* this process on that device */
    uint64_t by_kind[KIND_COUNT];
    uint64_t untracked;      /* total - free - tracked, floored at 0 */
    enum format_cause cause;
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

/* A new chain begins: returns its 1-based number in the process. */
uint32_t oom_ledger_new_chain(void);
/* A failed attempt of chain o (its o->attempts-th) at time t. */
void oom_ledger_failed(const struct oom_info *o, int64_t t);
/* Chain o succeeded at time t on the attempt after its last failure. */
void oom_ledger_recovered(const struct oom_info *o, int64_t t);
/* A post-mortem was not written (CUMEMTRACE_MAX_OOM_DUMPS). */
void oom_ledger_suppressed(void);
/* A post-mortem file was written / removed (ooms.dumps keeps the first 8). */
void oom_ledger_dump_added(const char *path);
void oom_ledger_dump_removed(const char *path);

/* Fills the request's measures: the driver's free and total (one real
 * cuMemGetInfo, no tracker lock held by the caller), what the process
 * holds by kind, the untracked remainder, the cause and the shortfall. */
void oom_ledger_measure(struct oom_info *o, bool by_limit);
/* The application released `bytes` of `stack` while chain o was open. */
void oom_ledger_released(struct oom_info *o, uint64_t bytes, uint32_t stack);

/* A copy of the totals and the attempt log. */
void oom_ledger_summary(struct oom_summary *out);
/* How many post-mortems were not written. */
uint64_t oom_ledger_suppressed_count(void);
/* A number that changes whenever anything is added to the ledger (the
 * stream checkpoints when it moved). */
uint64_t oom_ledger_activity(void);
/* fork child: the parent's failures are not the child's. */
void oom_ledger_atfork_child(void);

#endif
