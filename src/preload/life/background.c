/* background.c - the library's one thread.
 *
 * Started at the process's first CUDA call (a process that never touches
 * CUDA gets no thread), with every signal blocked, so no host signal is ever
 * delivered to it.  It sleeps on a semaphore (wake.c) and wakes
 *   - when a termination-signal handler posts it (signals.c): it writes
 *     the snapshot and ends the process,
 *   - every CUMEMTRACE_FLUSH_MS: appends to the stream file (stream.c),
 *   - when CUMEMTRACE_SIGNAL's handler posts it: writes that snapshot,
 *   - every CUMEMTRACE_INTERVAL: writes a periodic snapshot (periodic.c);
 *     before these snapshots it asks the PyTorch layer for fresh figures
 *     (torch_layer.c: a bounded wait, never holding a lock of the tracker).
 * The handler itself only posts the semaphore and waits: everything that
 * takes locks or allocates happens here, on a thread that holds none of the
 * interrupted thread's locks.
 *
 * The semaphore and whether the thread runs in this process are wake.c's, so
 * that the signal handler reaches the thread without depending on it.
 *
 * Pacing: a periodic or CUMEMTRACE_SIGNAL dump costs the host the time
 * PyTorch's figures take to read on its main thread and this thread's CPU
 * time (the copy under the tracker's lock, the serialising), so the next
 * such dump waits at least DUMP_SHARE_WAIT times what the last one cost:
 * those dumps take at most 1 / (1 + DUMP_SHARE_WAIT) = 5 % of the host's
 * time.  Time spent waiting for a main thread that does not answer costs
 * the host nothing and is not counted.
 * A periodic dump due earlier is late (the interval coarsens), and signals
 * arriving meanwhile are answered together by one dump when it may run.
 * cumemtrace_dump() is the host's own request and is not paced.
 *
 * `work` is held while the thread works: fork() waits for it (a child must
 * not inherit a lock the thread held half-way through a dump), and so does
 * the exit path before it publishes or removes the files.
 */
#include "background.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "hooks.h"
#include "log.h"
#include "periodic.h"
#include "signals.h"
#include "stream.h"
#include "torch_layer.h"
#include "wake.h"

static int stopped;
static pthread_mutex_t work = PTHREAD_MUTEX_INITIALIZER;

/* True in the process whose thread runs.  Async-signal-safe. */
static bool background_running(void)
{
    return wake_armed();
}

static int64_t next_due(int64_t last, uint64_t period_ms)
{
    return last + (int64_t)period_ms * 1000000;
}

/* 19: the paced dumps' share of the host's time is 1 / (1 + 19) = 5 %. */
#define DUMP_SHARE_WAIT 19

/* What a paced dump cost the host so far: begin, then pace. */
struct dump_cost {
    int64_t cpu_ns;     /* this thread's CPU time at the start */
    int64_t reading_ns; /* the layer's readings' total at the start */
};

static struct dump_cost cost_begin(void)
{
    return (struct dump_cost){clock_thread_cpu_ns(), torch_layer_reading_ns()};
}

/* The earliest time the next paced dump may start, after the one begun at
 * `c`, which ends now. */
static int64_t paced(struct dump_cost c)
{
    int64_t cost = clock_thread_cpu_ns() - c.cpu_ns + torch_layer_reading_ns() - c.reading_ns;
    return clock_now_ns() + DUMP_SHARE_WAIT * (cost > 0 ? cost : 0);
}

static void *run(void *arg)
{
    (void)arg;
    hooks_depth = 1; /* nothing this thread does is the host's CUDA call */
    int64_t now = clock_now_ns();
    int64_t flush_at = stream_enabled() ? now : INT64_MAX; /* a file at once */
    int64_t periodic_at = config.interval_ms ? next_due(now, config.interval_ms) : INT64_MAX;
    int64_t allowed_at = 0; /* the next paced dump, not before */
    for (;;) {
        int64_t due = periodic_at > allowed_at ? periodic_at : allowed_at;
        if (signals_dump_asked())
            due = allowed_at < due ? allowed_at : due;
        due = flush_at < due ? flush_at : due;
        int timeout = -1;
        if (due != INT64_MAX) {
            int64_t ms = (due - clock_now_ns()) / 1000000 + 1;
            timeout = ms < 0 ? 0 : ms > 3600000 ? 3600000 : (int)ms;
        }
        wake_wait(timeout);
        pthread_mutex_lock(&work);
        if (__atomic_load_n(&stopped, __ATOMIC_ACQUIRE)) {
            pthread_mutex_unlock(&work);
            return NULL;
        }
        if (signals_pending())
            signals_serve(); /* ends the process */
        now = clock_now_ns();
        if (signals_dump_asked() && now >= allowed_at) {
            struct dump_cost c = cost_begin();
            signals_serve_dump_request();
            allowed_at = paced(c);
            now = clock_now_ns();
        }
        if (now >= flush_at) {
            stream_flush(now);
            flush_at = next_due(now, config.flush_ms);
        }
        if (now >= periodic_at && now >= allowed_at) {
            struct dump_cost c = cost_begin();
            torch_layer_refresh(false);
            periodic_dump();
            periodic_at = next_due(now, config.interval_ms);
            allowed_at = paced(c);
        }
        pthread_mutex_unlock(&work);
    }
}

int background_start(void)
{
    if (background_running())
        return 0;
    wake_open();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits it */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, run, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        log_msg(LOG_WARN, "cannot start the background thread: %s; no snapshot "
                          "on SIGTERM and no stream (raise the thread limit, "
                          "ulimit -u)", strerror(rc));
        return -1;
    }
    pthread_setname_np(t, "cumemtrace");
    wake_arm();
    return 0;
}

bool background_pause(void)
{
    if (!background_running())
        return true; /* no thread: nothing else touches the files */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    /* A thread stuck in a dump (a lock held by a thread that exit() left
     * half-way) must not hang the caller: go on without it. */
    return pthread_mutex_timedlock(&work, &until) == 0;
}

void background_resume(void)
{
    if (background_running())
        pthread_mutex_unlock(&work);
}

bool background_stop(void)
{
    if (!background_running())
        return true;
    bool held = background_pause();
    __atomic_store_n(&stopped, 1, __ATOMIC_RELEASE);
    /* From here a termination signal acts as without us: the exit path
     * already writes the record. */
    wake_disarm();
    if (held)
        pthread_mutex_unlock(&work);
    return held;
}

void background_atfork_prepare(void)
{
    if (background_running())
        pthread_mutex_lock(&work);
}

void background_atfork_parent(void)
{
    if (background_running())
        pthread_mutex_unlock(&work);
}

void background_atfork_child(void)
{
    pthread_mutex_init(&work, NULL);
    wake_disarm();
    __atomic_store_n(&stopped, 0, __ATOMIC_RELEASE);
}
