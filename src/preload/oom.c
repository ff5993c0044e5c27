/* oom.c - the out-of-memory post-mortem.
 *
 * At the failing call, before its error goes back to the caller, we capture
 * the request, the driver's truth (cuMemGetInfo), what this process holds by
 * kind and the untracked remainder, classify the cause, and write the
 * post-mortem snapshot at once - the process may abort next.
 *
 * Retry chains: PyTorch answers a failed cudaMalloc by freeing cached
 * segments and retrying the same size, 2-3 attempts per user-visible OOM
 * (DESIGN.md).  A failure on the thread of an open chain for the same size,
 * kind and device extends the chain: one post-mortem, rewritten with the new
 * attempt count; frees on that thread in between are counted as released.
 * A success for the same request closes it as recovered; any other
 * allocation on that thread closes it as failed.
 *
 * Cause: the limit refused it -> "limit"; the driver says free >= request ->
 * "fragmentation" (memory is free but no placement fits); else "exhausted".
 *
 * Threads: chain state is per thread (a pointer in TLS); the summary and the
 * dump budget are under `lock`.  Workload: nothing on the success/free paths
 * but one TLS load unless a chain is open.
 */
#include "oom.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "hooks.h"
#include "log.h"
#include "snapshot_write.h"
#include "units.h"

static __thread struct oom_info *chain __attribute__((tls_model("initial-exec")));
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct oom_summary summary;
static unsigned dumps_written;

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

static void classify(struct oom_info *o, bool by_limit)
{
    struct record_view v;
    o->tracked = record_current(o->device);
    memset(o->by_kind, 0, sizeof o->by_kind);
    if (record_view_take(&v) == 0) {
        int pool = o->device < 0 ? RECORD_HOST_POOL : o->device;
        for (int k = 0; k < KIND_COUNT; k++)
            o->by_kind[k] = v.pools[pool].kinds[k].current;
        record_view_free(&v);
    }
    o->limit = o->device >= 0 ? record_limit(o->device) : 0;
    o->untracked = 0;
    if (o->total_bytes >= 0) {
        int64_t u = o->total_bytes - o->free_bytes - (int64_t)o->tracked;
        o->untracked = u > 0 ? (uint64_t)u : 0;
    }
    o->shortfall = 0;
    if (by_limit) {
        o->cause = "limit";
        uint64_t room = o->limit > o->tracked ? o->limit - o->tracked : 0;
        o->shortfall = o->requested > room ? o->requested - room : 0;
    } else if (o->free_bytes >= 0 && (uint64_t)o->free_bytes >= o->requested) {
        o->cause = "fragmentation";
    } else {
        o->cause = "exhausted";
        if (o->free_bytes >= 0)
            o->shortfall = o->requested - (uint64_t)o->free_bytes;
    }
}

static void say(const struct oom_info *o)
{
    char req[32], tot[32], fre[32], trk[32], unt[32], lim[32];
    const char *where = o->device < 0 ? "host" : "GPU";
    units_format_bytes(o->requested, req, sizeof req);
    log_msg(LOG_ERROR, "out of memory: %s of %s on %s %d failed (%s)",
            resolve_name(o->slot), req, where, o->device < 0 ? 0 : o->device,
            o->cause);
    if (o->total_bytes >= 0)
        log_msg(LOG_ERROR, "  GPU %d: total %s, free %s, this process %s, "
                           "untracked %s",
                o->device, units_format_bytes((uint64_t)o->total_bytes, tot, sizeof tot),
                units_format_bytes((uint64_t)o->free_bytes, fre, sizeof fre),
                units_format_bytes(o->tracked, trk, sizeof trk),
                units_format_bytes(o->untracked, unt, sizeof unt));
    if (o->limit != 0 && strcmp(o->cause, "limit") == 0)
        log_msg(LOG_ERROR, "  refused by CUMEMTRACE_LIMIT=%s: this process "
                           "holds %s",
                units_format_bytes(o->limit, lim, sizeof lim),
                units_format_bytes(o->tracked, trk, sizeof trk));
    if (o->path[0])
        log_msg(LOG_ERROR, "  post-mortem: %s (read it with: cumemtrace report "
                           "%s)", o->path, o->path);
}

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

static void close_chain(bool recovered, int64_t now)
{
    struct oom_info *o = chain;
    if (o == NULL || !o->open)
        return;
    o->open = false;
    o->recovered = recovered;
    if (recovered) {
        pthread_mutex_lock(&lock);
        summary.recovered++;
        summary.retry_released_bytes += o->released_bytes;
        log_attempt_locked(o, now, true);
        pthread_mutex_unlock(&lock);
        if (o->path[0]) /* the post-mortem now says it recovered */
            snapshot_write("oom", o->path, o, NULL, 0);
        char req[32], rel[32];
        log_msg(LOG_INFO, "recovered: %s of %s succeeded on attempt %u after "
                          "the application released %s",
                resolve_name(o->slot),
                units_format_bytes(o->requested, req, sizeof req),
                o->attempts + 1,
                units_format_bytes(o->released_bytes, rel, sizeof rel));
    }
}

void oom_on_failure(unsigned slot, enum record_kind kind, int device,
                    uint64_t requested, bool by_limit,
                    struct record_stack *stack, int64_t now)
{
    if (chain == NULL && (chain = calloc(1, sizeof *chain)) == NULL)
        return;
    struct oom_info *o = chain;
    bool same = o->open && o->requested == requested && o->kind == kind &&
                o->device == (kind == KIND_HOST_PINNED ? -1 : device);
    pthread_mutex_lock(&lock);
    summary.failed_attempts++;
    uint32_t chain_no = same ? o->chain : (uint32_t)++summary.count;
    pthread_mutex_unlock(&lock);

    if (!same) {
        memset(o, 0, sizeof *o);
        o->requested = requested;
        o->kind = kind;
        o->device = kind == KIND_HOST_PINNED ? -1 : device;
        o->slot = slot;
        o->tid = (uint32_t)syscall(SYS_gettid);
        o->time_ns = now;
        o->stack = stack ? stack->id : 0;
        o->open = true;
        o->chain = chain_no;
    }
    o->attempts++;
    pthread_mutex_lock(&lock);
    log_attempt_locked(o, now, false);
    pthread_mutex_unlock(&lock);
    device_truth(o);
    classify(o, by_limit);

    if (same) {
        if (o->path[0])
            snapshot_write("oom", o->path, o, NULL, 0);
        return;
    }
    pthread_mutex_lock(&lock);
    bool budget = dumps_written < config.max_oom_dumps;
    if (budget)
        dumps_written++;
    else
        summary.suppressed++;
    pthread_mutex_unlock(&lock);
    if (budget) {
        char path[4096];
        if (snapshot_write("oom", NULL, o, path, sizeof path) == 0) {
            snprintf(o->path, sizeof o->path, "%s", path);
            pthread_mutex_lock(&lock);
            if (summary.ndumps < 8 && strlen(path) < sizeof summary.dumps[0])
                memcpy(summary.dumps[summary.ndumps++], path, strlen(path) + 1);
            pthread_mutex_unlock(&lock);
        }
    }
    say(o);
}

void oom_on_success(enum record_kind kind, int device, uint64_t requested,
                    int64_t now)
{
    struct oom_info *o = chain;
    if (__builtin_expect(o == NULL || !o->open, 1))
        return;
    close_chain(o->requested == requested && o->kind == kind &&
                    o->device == (kind == KIND_HOST_PINNED ? -1 : device),
                now);
}

void oom_on_free(uint64_t bytes, uint32_t stack)
{
    struct oom_info *o = chain;
    if (__builtin_expect(o == NULL || !o->open, 1))
        return;
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

void oom_summary_get(struct oom_summary *out)
{
    pthread_mutex_lock(&lock);
    *out = summary;
    pthread_mutex_unlock(&lock);
}

void oom_atfork_child(void)
{
    memset(&summary, 0, sizeof summary);
    dumps_written = 0;
    if (chain != NULL)
        chain->open = false;
    pthread_mutex_init(&lock, NULL);
}
