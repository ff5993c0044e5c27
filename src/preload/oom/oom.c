/* oom.c - the out-of-memory post-mortem.
 *
 * At the failing call, before its error goes back to the caller, we capture
 * the request, the driver's truth (cuMemGetInfo), what this process holds by
 * kind and the untracked remainder, classify the cause, and write the
 * post-mortem snapshot at once - the process may abort next.
 *
 * Retry chains: PyTorch answers a failed cudaMalloc by freeing cached
 * segments and retrying the same size, 2-3 attempts per user-visible OOM
 * (docs/design.md, "Facts"); other hosts retry in a loop.  A failure on the thread of an
 * open chain for the same size, kind and device extends the chain; frees on
 * that thread in between are counted as released.  A success for the same
 * request closes it as recovered; any other allocation or failure on that
 * thread closes it as given up.
 *
 * Post-mortem writes (a dump costs O(live allocations)):
 * one file per chain, written at its first failure - until the process has
 * shown that it retries (a chain recovered: a caching allocator's routine).
 * From then on a chain's first failure only registers its post-mortem
 * (`pending`), which is written at the chain's next failed attempt, when it
 * gives up, or at exit or a termination signal, and never when the retry
 * succeeds: a recovered chain costs O(1), not a dump.  The first chain of every process is written at once,
 * so a host that aborts at its first failure keeps its post-mortem.  A further attempt only
 * updates the chain in memory (O(1)); the file is rewritten when the chain
 * ends, when its cause changes (at most every 100 ms), while attempts pile
 * up at most once a second, and at exit if it never ended - so the file
 * holds the chain's final state and lags a live loop by at most a second.
 * Chains beyond CUMEMTRACE_MAX_OOM_DUMPS are counted (ooms.suppressed), not
 * written, and not printed after one line that says so; the exit summary
 * says how many.  `postmortem_new` and `postmortem_sync` are the only places
 * that decide what is written.
 *
 * What is known of each chain and of the process's failures is kept by the
 * ledger (oom_ledger.c), which the serialiser reads; this file decides what
 * is written and when, and calls the writer (snapshot_write.c).
 *
 * Threads: chain state is per thread (a pointer in TLS); the dump budget
 * and the post-mortems are under `lock`.  Workload: nothing on the
 * success/free paths but one TLS load unless a chain is open.
 */
#include "oom.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator.h"
#include "clock.h"
#include "config.h"
#include "torch_protocol.h"
#include "dump_guard.h"
#include "log.h"
#include "oom_ledger.h"
#include "output.h"
#include "phases.h"
#include "resolve.h"
#include "snapshot_write.h"
#include "units.h"

/* oom_chain is a member of thread_hot (thread/thread_hot.c). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned dumps_written;
static bool cap_said; /* the one line printed when the budget ran out */

/* Rewrite intervals: a chain's cause changing is worth a prompt update; a
 * growing attempt count is not, but a process killed in a retry loop should
 * leave a file at most this stale. */
#define REWRITE_MATERIAL_NS INT64_C(100000000) /* 100 ms */
#define REWRITE_PERIODIC_NS INT64_C(1000000000) /* 1 s */

/* A written post-mortem: its own copy of the chain's state (the thread's
 * chain may be reused or freed), under `lock`.  At most
 * CUMEMTRACE_MAX_OOM_DUMPS of them, never freed while the process lives. */
struct postmortem {
    struct oom_info info;   /* the chain as of its latest attempt */
    struct {                /* what the file states of what changes */
        enum format_cause cause;
        unsigned attempts;
        bool recovered;
        uint64_t released_bytes;
        int64_t free_bytes;
        bool has_allocator;
    } file;
    int64_t written_ns;     /* when the file was last written */
    bool pending;           /* registered, not written yet (no file, no number) */
    bool dirty;             /* `info` is newer than the file */
    bool gone;              /* removed: its chain recovered */
};

static bool differs(const struct postmortem *p, const struct oom_info *o)
{
    return p->file.cause != o->cause || p->file.attempts != o->attempts ||
           p->file.recovered != o->recovered ||
           p->file.released_bytes != o->released_bytes ||
           p->file.free_bytes != o->free_bytes ||
           p->file.has_allocator != o->has_allocator;
}

/* The caller holds `lock` and writes p->info next. */
static void mark_written(struct postmortem *p, int64_t now)
{
    p->file.cause = p->info.cause;
    p->file.attempts = p->info.attempts;
    p->file.recovered = p->info.recovered;
    p->file.released_bytes = p->info.released_bytes;
    p->file.free_bytes = p->info.free_bytes;
    p->file.has_allocator = p->info.has_allocator;
    p->written_ns = now;
    p->dirty = false;
}
static struct postmortem **pms;
static unsigned npms, pms_cap;
static bool retries_seen; /* a chain recovered: later first failures wait */

static void say(const struct oom_info *o)
{
    char req[32], tot[32], fre[32], trk[32], unt[32], lim[32];
    const char *where = o->device < 0 ? "host" : "GPU";
    units_format_bytes(o->requested, req, sizeof req);
    /* Many ranks share one terminal: the first line says whose it is. */
    char who[48];
    if (output_process.rank >= 0)
        snprintf(who, sizeof who, "pid %d, rank %d", (int)getpid(), output_process.rank);
    else
        snprintf(who, sizeof who, "pid %d", (int)getpid());
    if (o->by_allocator) /* its own refusal: no CUDA call failed */
        log_msg(LOG_ERROR, "out of memory (%s): %s refused %s on %s %d by itself, "
                           "without a CUDA call (%s)", who,
                strcmp(o->allocator.name, "pytorch") == 0 ? "PyTorch"
                : o->allocator.name[0]                     ? o->allocator.name
                                                           : "the caching allocator",
                req, where, o->device < 0 ? 0 : o->device, format_cause_name(o->cause));
    else
        log_msg(LOG_ERROR, "out of memory (%s): %s of %s on %s %d failed (%s)", who,
                resolve_name(o->slot), req, where, o->device < 0 ? 0 : o->device,
                format_cause_name(o->cause));
    if (o->total_bytes >= 0)
        log_msg(LOG_ERROR, "  GPU %d: total %s, free %s, this process %s, "
                           "untracked %s",
                o->device, units_format_bytes((uint64_t)o->total_bytes, tot, sizeof tot),
                units_format_bytes((uint64_t)o->free_bytes, fre, sizeof fre),
                units_format_bytes(o->tracked, trk, sizeof trk),
                units_format_bytes(o->untracked, unt, sizeof unt));
    if (o->limit != 0 && o->cause == FORMAT_CAUSE_LIMIT)
        log_msg(LOG_ERROR, "  refused by CUMEMTRACE_LIMIT=%s: this process "
                           "holds %s",
                units_format_bytes(o->limit, lim, sizeof lim),
                units_format_bytes(o->tracked, trk, sizeof trk));
    if (o->path[0])
        log_msg(LOG_ERROR, "  post-mortem: %s (read it with: cumemtrace report "
                           "%s)", o->path, o->path);
}

/* Writes a pending post-mortem's file under a new name (`copy` is the
 * chain as of now) and makes p and the chain `o` (NULL: not this thread's)
 * name it.  The caller holds no lock. */
static void postmortem_first_write(struct postmortem *p, struct oom_info *copy,
                                   struct oom_info *o)
{
    char path[4096];
    if (snapshot_write("oom", NULL, copy, path, sizeof path) != 0)
        return; /* said; the chain goes on without a file */
    pthread_mutex_lock(&lock);
    snprintf(p->info.path, sizeof p->info.path, "%s", path);
    pthread_mutex_unlock(&lock);
    if (o != NULL)
        snprintf(o->path, sizeof o->path, "%s", path);
    oom_ledger_dump_added(path);
}

/* Writes the chain's post-mortem if the policy above says so; final: the
 * chain ended (or the process does).  The caller holds no lock. */
static void postmortem_sync(struct oom_info *o, int64_t now, bool final)
{
    if (o->postmortem == 0)
        return;
    struct oom_info *copy = NULL;
    pthread_mutex_lock(&lock);
    struct postmortem *p = pms[o->postmortem - 1];
    bool pending = p->pending;
    p->info = *o;
    p->dirty = pending || differs(p, o);
    int64_t since = now - p->written_ns;
    bool material = o->cause != p->file.cause || o->recovered;
    /* pending: the retry failed too (or the chain ended): write it now */
    if (p->dirty && (pending || final || since >= REWRITE_PERIODIC_NS ||
                     (material && since >= REWRITE_MATERIAL_NS))) {
        copy = malloc(sizeof *copy);
        if (copy != NULL) {
            *copy = p->info;
            mark_written(p, now);
            p->pending = false;
        }
    }
    pthread_mutex_unlock(&lock);
    if (copy != NULL) {
        if (pending)
            postmortem_first_write(p, copy, o);
        else
            snapshot_write("oom", copy->path, copy, NULL, 0);
        free(copy);
    }
}

/* A new chain's first failure: writes its post-mortem while the budget
 * lasts.  Returns whether the chain is reported (printed); after the budget
 * ran out one line says so and the rest is only counted. */
static bool postmortem_new(struct oom_info *o, int64_t now)
{
    pthread_mutex_lock(&lock);
    bool budget = dumps_written < config.max_oom_dumps;
    bool say_cap = !budget && !cap_said;
    if (budget)
        dumps_written++;
    cap_said = cap_said || say_cap;
    if (budget && npms == pms_cap) {
        unsigned cap = pms_cap ? pms_cap * 2 : 8;
        struct postmortem **t = realloc(pms, cap * sizeof *t);
        if (t != NULL) {
            pms = t;
            pms_cap = cap;
        }
    }
    struct postmortem *p = budget && npms < pms_cap ? calloc(1, sizeof *p) : NULL;
    pthread_mutex_unlock(&lock);
    if (!budget)
        oom_ledger_suppressed();
    if (say_cap) {
        char req[32];
        log_msg(LOG_ERROR, "out of memory again: %s of %s failed (%s); "
                           "CUMEMTRACE_MAX_OOM_DUMPS=%u post-mortems are written, so "
                           "further failures are only counted (ooms in the exit "
                           "snapshot); raise it to see each one",
                resolve_name(o->slot),
                units_format_bytes(o->requested, req, sizeof req), format_cause_name(o->cause),
                config.max_oom_dumps);
    }
    if (!budget)
        return false;
    /* pending: only registered, written by postmortem_sync or at exit */
    bool pending = p != NULL && __atomic_load_n(&retries_seen, __ATOMIC_ACQUIRE);
    char path[4096];
    if (!pending && (p == NULL || snapshot_write("oom", NULL, o, path, sizeof path) != 0)) {
        free(p);
        return true;
    }
    if (!pending)
        snprintf(o->path, sizeof o->path, "%s", path);
    o->reported = true; /* the copy below must know it (oom_at_exit) */
    pthread_mutex_lock(&lock);
    pms[npms++] = p;
    o->postmortem = npms;
    p->info = *o;
    mark_written(p, now);
    p->pending = p->dirty = pending;
    pthread_mutex_unlock(&lock);
    if (!pending)
        oom_ledger_dump_added(path);
    return true;
}

/* A recovered chain's post-mortem is routine: removed, its budget slot and
 * file number given back, out of ooms.dumps. */
static void postmortem_forget(struct oom_info *o)
{
    pthread_mutex_lock(&lock);
    struct postmortem *p = pms[o->postmortem - 1];
    bool pending = p->pending;
    p->gone = true;
    p->dirty = p->pending = false;
    if (dumps_written > 0)
        dumps_written--;
    pthread_mutex_unlock(&lock);
    o->postmortem = 0;
    if (pending)
        return; /* never written: no file, no number to give back */
    oom_ledger_dump_removed(o->path);
    unlink(o->path);
    snapshot_name_release("oom", o->path);
    o->path[0] = '\0';
}

static void close_chain(bool recovered, int64_t now)
{
    struct oom_info *o = oom_chain;
    if (o == NULL || !o->open)
        return;
    o->open = false;
    o->recovered = recovered;
    if (recovered) {
        oom_ledger_recovered(o, now);
        __atomic_store_n(&retries_seen, true, __ATOMIC_RELEASE);
    }
    if (recovered && !config.oom_dumps_all && o->postmortem != 0) {
        postmortem_forget(o);
    } else {
        bool tell = !recovered && o->reported && !o->said;
        o->said = o->said || tell;
        postmortem_sync(o, now, true); /* the file states how the chain ended */
        if (tell)
            say(o); /* after: a pending post-mortem has its name only now */
    }
    if (recovered && o->reported) {
        char req[32], rel[32];
        log_msg(LOG_NOTE, "recovered: %s of %s succeeded on attempt %u after "
                          "the application released %s%s",
                resolve_name(o->slot),
                units_format_bytes(o->requested, req, sizeof req),
                o->attempts + 1,
                units_format_bytes(o->released_bytes, rel, sizeof rel),
                config.oom_dumps_all ? "" : " (routine for a caching allocator: no "
                                            "post-mortem kept; CUMEMTRACE_OOM_DUMPS=all "
                                            "keeps them)");
    }
}

static void on_failure(unsigned slot, enum record_kind kind, int device,
                       uint64_t requested, bool by_limit,
                       struct record_stack *stack, int64_t now)
{
    if (oom_chain == NULL && (oom_chain = calloc(1, sizeof *oom_chain)) == NULL)
        return;
    struct oom_info *o = oom_chain;
    bool same = o->open && o->requested == requested && o->kind == kind &&
                o->device == (FORMAT_KIND_ON_HOST(kind) ? -1 : device);
    if (!same) {
        close_chain(false, now); /* a different request: that one gave up */
        memset(o, 0, sizeof *o);
        o->requested = requested;
        o->kind = kind;
        o->device = FORMAT_KIND_ON_HOST(kind) ? -1 : device;
        o->slot = slot;
        o->tid = (uint32_t)syscall(SYS_gettid);
        o->time_ns = now;
        o->stack = stack ? stack->id : 0;
        o->phase = phase_now();
        o->open = true;
        o->chain = oom_ledger_new_chain();
    }
    o->attempts++;
    oom_ledger_failed(o, now);
    oom_ledger_measure(o, by_limit);

    if (same) {
        postmortem_sync(o, now, false);
        return;
    }
    /* The file is written now (the process may abort next); stderr waits
     * for the chain to fail for good - a retry that recovers is routine. */
    o->reported = postmortem_new(o, now);
}

/* The whole failure under a dump guard, not only the file: a signal
 * handler that leaves by pthread_exit, or a cancel, acts once the
 * post-mortem is written and counted (ooms.dumps), not between the two. */
void oom_on_failure(unsigned slot, enum record_kind kind, int device,
                    uint64_t requested, bool by_limit,
                    struct record_stack *stack, int64_t now)
{
    struct dump_guard g;
    dump_guard_enter(&g);
    on_failure(slot, kind, device, requested, by_limit, stack, now);
    dump_guard_leave(&g);
}

void oom_on_success(enum record_kind kind, int device, uint64_t requested,
                    int64_t now)
{
    struct oom_info *o = oom_chain;
    if (__builtin_expect(o == NULL || !o->open, 1))
        return;
    close_chain(o->requested == requested && o->kind == kind &&
                    o->device == (FORMAT_KIND_ON_HOST(kind) ? -1 : device),
                now);
}

void oom_on_free(uint64_t bytes, uint32_t stack)
{
    struct oom_info *o = oom_chain;
    if (__builtin_expect(o == NULL || !o->open, 1))
        return;
    oom_ledger_released(o, bytes, stack);
}

/* A caching allocator's figures for its OOM on `device`: attached to the
 * calling thread's open chain on that device, whose post-mortem is
 * rewritten; with no such chain (the allocator refused by itself) a
 * post-mortem is written for the refusal. */
static void on_allocator(int device, const struct allocator_facts *f, int64_t now)
{
    if (oom_chain == NULL && (oom_chain = calloc(1, sizeof *oom_chain)) == NULL)
        return;
    struct oom_info *o = oom_chain;
    bool fresh = !(o->open && o->device == device && !FORMAT_KIND_ON_HOST(o->kind));
    if (fresh) {
        /* Nothing failed at the driver: the allocator's own refusal, a
         * chain of its own with no CUDA attempt. */
        close_chain(false, now);
        memset(o, 0, sizeof *o);
        o->requested = f->requested > 0 ? (uint64_t)f->requested : 0;
        o->kind = KIND_DEVICE;
        o->device = device;
        o->tid = (uint32_t)syscall(SYS_gettid);
        o->phase = phase_now();
        o->time_ns = now;
        o->by_allocator = true;
        o->attempts = 1; /* the allocator's own failed attempt */
        o->chain = oom_ledger_new_chain();
        oom_ledger_failed(o, now);
        oom_ledger_measure(o, false);
    } else if (o->phase == PHASE_NONE) {
        /* The allocator's report runs on the failing thread: a layer that
         * names its phase only then (the PyTorch layer's default, from the
         * frames running at the failure) has it open now. */
        o->phase = phase_now();
    }
    o->allocator = *f;
    o->has_allocator = true;
    enum format_cause cause = allocator_cause(f);
    if (cause != FORMAT_CAUSE_NONE)
        o->cause = cause;
    else if (o->by_allocator)
        o->cause = FORMAT_CAUSE_ALLOCATOR; /* refused for a reason it did not state */
    if (o->cause == FORMAT_CAUSE_ALLOCATOR_LIMIT && f->limit >= 0 && f->reserved >= 0)
        o->shortfall = (uint64_t)(f->reserved + f->requested - f->limit);
    if (!fresh) {
        /* The allocator gave up (it raises next): the chain ends here as
         * failed, so the same request failing again later is a new chain. */
        close_chain(false, now);
        return;
    }
    o->reported = postmortem_new(o, now);
    if (o->reported) {
        say(o);
        o->said = true;
        /* The post-mortem's copy too, or oom_at_exit takes the refusal for
         * a chain still open and prints it a second time. */
        pthread_mutex_lock(&lock);
        if (o->postmortem != 0)
            pms[o->postmortem - 1]->info.said = true;
        pthread_mutex_unlock(&lock);
    }
}

/* The PyTorch layer's entry point (life/torch_protocol.h): PyTorch's
 * out-of-memory observer runs after PyTorch released its allocator mutex, so taking our
 * locks and writing a file here cannot deadlock against the allocator. */
__attribute__((visibility("default"))) int
cumemtrace_allocator_oom(int device, const struct cumemtrace_allocator_facts *in)
{
    struct allocator_facts f;
    if (!allocator_take(device, in, &f))
        return -1;
    struct dump_guard g;
    dump_guard_enter(&g);
    on_allocator(device, &f, clock_now_ns());
    dump_guard_leave(&g);
    return 0;
}

void oom_at_exit(int64_t now)
{
    pthread_mutex_lock(&lock);
    unsigned n = npms;
    pthread_mutex_unlock(&lock);
    uint64_t suppressed = oom_ledger_suppressed_count();
    for (unsigned i = 0; i < n; i++) {
        struct oom_info *copy = NULL;
        pthread_mutex_lock(&lock);
        struct postmortem *p = pms[i];
        bool unsaid = false, pending = p->pending, rewrite = !p->gone && p->dirty;
        if (!p->gone && p->info.reported && !p->info.said) {
            p->info.said = true; /* a chain still open at exit failed */
            unsaid = true;
        }
        if (!p->gone && (p->dirty || unsaid) && (copy = malloc(sizeof *copy)) != NULL) {
            *copy = p->info;
            if (p->dirty)
                mark_written(p, now);
            p->pending = false;
        }
        pthread_mutex_unlock(&lock);
        if (copy == NULL)
            continue;
        if (pending)
            postmortem_first_write(p, copy, NULL);
        else if (rewrite)
            snapshot_write("oom", copy->path, copy, NULL, 0);
        if (unsaid) {
            pthread_mutex_lock(&lock);
            snprintf(copy->path, sizeof copy->path, "%s", p->info.path);
            pthread_mutex_unlock(&lock);
            say(copy); /* after the write: it names the file */
        }
        free(copy);
    }
    if (suppressed != 0)
        log_msg(LOG_ERROR, "%" PRIu64 " more out-of-memory failures were counted "
                           "but not written or printed (CUMEMTRACE_MAX_OOM_DUMPS=%u); "
                           "the exit snapshot counts them in ooms.suppressed",
                suppressed, config.max_oom_dumps);
}

void oom_thread_end(void)
{
    free(oom_chain);
    oom_chain = NULL;
}

void oom_atfork_child(void)
{
    oom_ledger_atfork_child();
    dumps_written = 0;
    cap_said = false; /* retries_seen stays: the same allocator runs on */
    for (unsigned i = 0; i < npms; i++) /* the parent's files, not ours */
        free(pms[i]);
    npms = 0;
    if (oom_chain != NULL)
        oom_chain->open = false;
    pthread_mutex_init(&lock, NULL);
}
