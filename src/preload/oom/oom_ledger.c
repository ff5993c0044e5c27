/* oom_ledger.c - the record of the process's out-of-memory failures.
 *
 * Bookkeeping only: oom.c tells it what happened (a chain began, an
 * attempt failed, a chain recovered, a post-mortem was written) and it
 * keeps the totals and the first OOM_ATTEMPTS_KEPT attempts that every
 * snapshot's "ooms" section states.  It writes no file and calls no
 * writer, so the serialiser reads it without depending on what decides to
 * dump.  Cause (format.h): the limit refused it -> LIMIT; the driver says
 * free >= request -> REFUSED_WHILE_FREE (memory is free, yet refused);
 * else EXHAUSTED, or OTHER_PROCESSES when the memory outside this process
 * would have covered the request.
 *
 * Threads: the summary is under `lock`; a chain's oom_info belongs to the
 * thread that owns it (oom.c).
 */
#include "oom_ledger.h"

#include <pthread.h>
#include <string.h>

#include "hooks.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct oom_summary summary;

/* Appends to the attempt log; the caller holds `lock`. */
static void log_attempt_locked(const struct oom_info *o, int64_t t, bool recovered)
{
    if (summary.nattempts == OOM_ATTEMPTS_KEPT)
        return;
    struct oom_attempt *a = &summary.attempts[summary.nattempts++];
    a->t_ns = t;
    a->requested = o->requested;
    a->device = o->device;
    a->chain = o->chain;
    a->attempt = (uint16_t)(recovered ? o->attempts + 1 : o->attempts);
    a->recovered = recovered;
}

uint32_t oom_ledger_new_chain(void)
{
    pthread_mutex_lock(&lock);
    uint32_t n = (uint32_t)++summary.count;
    pthread_mutex_unlock(&lock);
    return n;
}

void oom_ledger_failed(const struct oom_info *o, int64_t t)
{
    pthread_mutex_lock(&lock);
    summary.failed_attempts++;
    log_attempt_locked(o, t, false);
    pthread_mutex_unlock(&lock);
}

void oom_ledger_recovered(const struct oom_info *o, int64_t t)
{
    pthread_mutex_lock(&lock);
    summary.recovered++;
    summary.retry_released_bytes += o->released_bytes;
    log_attempt_locked(o, t, true);
    pthread_mutex_unlock(&lock);
}

void oom_ledger_suppressed(void)
{
    pthread_mutex_lock(&lock);
    summary.suppressed++;
    pthread_mutex_unlock(&lock);
}

void oom_ledger_dump_added(const char *path)
{
    size_t len = strlen(path);
    pthread_mutex_lock(&lock);
    if (summary.ndumps < 8 && len < sizeof summary.dumps[0])
        memcpy(summary.dumps[summary.ndumps++], path, len + 1);
    pthread_mutex_unlock(&lock);
}

void oom_ledger_dump_removed(const char *path)
{
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < summary.ndumps; i++)
        if (strcmp(summary.dumps[i], path) == 0) {
            memmove(summary.dumps[i], summary.dumps[i + 1],
                    (summary.ndumps - i - 1) * sizeof summary.dumps[0]);
            summary.ndumps--;
            break;
        }
    pthread_mutex_unlock(&lock);
}

static void device_truth(struct oom_info *o)
{
    o->free_bytes = o->total_bytes = -1;
    if (o->device < 0)
        return;
    PFN(cuMemGetInfo_v2) get = REAL(cuMemGetInfo_v2);
    size_t f, t;
    if (get != NULL && get(&f, &t) == CUDA_SUCCESS) {
        o->free_bytes = (int64_t)f;
        o->total_bytes = (int64_t)t;
        record_meminfo(o->device, f, t);
    }
}

/* Untracked memory a process's own CUDA context, cuBLAS/cuDNN workspaces
 * and NCCL buffers can explain: ~0.3-1 GiB on current GPUs. */
#define OOM_CONTEXT_ALLOWANCE (UINT64_C(1) << 30)

static void classify(struct oom_info *o, bool by_limit)
{
    o->tracked = record_current(o->device);
    record_pool_kinds(o->device, o->by_kind);
    o->limit = o->device >= 0 ? record_limit(o->device) : 0;
    o->untracked = 0;
    if (o->total_bytes >= 0) {
        int64_t u = o->total_bytes - o->free_bytes - (int64_t)o->tracked;
        o->untracked = u > 0 ? (uint64_t)u : 0;
    }
    o->shortfall = 0;
    if (by_limit) {
        o->cause = FORMAT_CAUSE_LIMIT;
        uint64_t room = o->limit > o->tracked ? o->limit - o->tracked : 0;
        o->shortfall = o->requested > room ? o->requested - room : 0;
    } else if (o->free_bytes >= 0 && (uint64_t)o->free_bytes >= o->requested) {
        /* not fragmentation: the MMU maps scattered pages (oom_text.h) */
        o->cause = FORMAT_CAUSE_REFUSED_WHILE_FREE;
    } else {
        o->cause = FORMAT_CAUSE_EXHAUSTED;
        if (o->free_bytes >= 0)
            o->shortfall = o->requested - (uint64_t)o->free_bytes;
        /* Had the memory outside this process's allocations been free
         * (beyond what a CUDA context and library workspaces take), the
         * request would have fit: someone else holds the device. */
        if (o->free_bytes >= 0 && o->untracked > o->shortfall + OOM_CONTEXT_ALLOWANCE)
            o->cause = FORMAT_CAUSE_OTHER_PROCESSES;
    }
}

void oom_ledger_measure(struct oom_info *o, bool by_limit)
{
    device_truth(o);
    classify(o, by_limit);
}

void oom_ledger_released(struct oom_info *o, uint64_t bytes, uint32_t stack)
{
    o->released_bytes += bytes;
    o->released_count++;
    unsigned i = 0;
    while (i < o->nreleased_by && o->released_by[i].stack != stack && i < 15)
        i++;
    if (i == o->nreleased_by) {
        o->released_by[i].stack = i == 15 ? 0 : stack; /* 0: other stacks */
        o->nreleased_by++;
    }
    o->released_by[i].bytes += bytes;
    o->released_by[i].count++;
}

void oom_ledger_summary(struct oom_summary *out)
{
    pthread_mutex_lock(&lock);
    *out = summary;
    pthread_mutex_unlock(&lock);
}

uint64_t oom_ledger_suppressed_count(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = summary.suppressed;
    pthread_mutex_unlock(&lock);
    return n;
}

uint64_t oom_ledger_activity(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = summary.count + summary.failed_attempts + summary.recovered;
    pthread_mutex_unlock(&lock);
    return n;
}

void oom_ledger_atfork_child(void)
{
    memset(&summary, 0, sizeof summary);
    pthread_mutex_init(&lock, NULL);
}
