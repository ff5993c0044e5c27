/* mark.c - cumemtrace_mark_begin/_end and cumemtrace_usage
 * (include/cumemtrace.h).
 *
 * The tracker keeps one "peak since the mark" per pool (record.h); nesting
 * lives here: each begin keeps the marks it replaced, each end hands them
 * back to the tracker, which folds the inner peak in.  A mutex of our own
 * orders begin/end pairs; the tracker's lock makes each one atomic against
 * allocations.  A forked child starts with an empty tracker (record.h) and
 * so without marks: the first call in a new process forgets the parent's.
 * The tracker counts the marks it holds as well, for the snapshot writer
 * (record_view.mark_depth): the writer never calls up into the public API.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cumemtrace.h"
#include "hooks.h"
#include "log.h"
#include "record.h"

static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static struct record_mark saved[CUMEMTRACE_MARK_DEPTH][RECORD_POOLS];
static int depth;
static pid_t owner; /* the process the marks belong to */

/* Called with mark_lock held. */
static void forget_parent_marks(void)
{
    pid_t me = getpid();
    if (owner != me) {
        __atomic_store_n(&owner, me, __ATOMIC_RELAXED);
        __atomic_store_n(&depth, 0, __ATOMIC_RELAXED);
    }
}

__attribute__((visibility("default"))) int cumemtrace_mark_begin(void)
{
    hooks_init_once();
    if (!hooks_enabled) {
        log_msg(LOG_WARN, "cumemtrace_mark_begin: tracing is disabled "
                          "(CUMEMTRACE_DISABLE is set); no mark set");
        return -1;
    }
    pthread_mutex_lock(&mark_lock);
    forget_parent_marks();
    int d = depth;
    if (d == CUMEMTRACE_MARK_DEPTH) {
        pthread_mutex_unlock(&mark_lock);
        log_msg(LOG_WARN, "cumemtrace_mark_begin: %d marks are already active; "
                          "end one (cumemtrace_mark_end) before starting another",
                d);
        return -1;
    }
    record_mark_set(saved[d], clock_now_ns());
    __atomic_store_n(&depth, d + 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mark_lock);
    return d + 1;
}

__attribute__((visibility("default"))) int cumemtrace_mark_end(int which)
{
    pthread_mutex_lock(&mark_lock);
    forget_parent_marks();
    int d = depth;
    if (d == 0) {
        pthread_mutex_unlock(&mark_lock);
        log_msg(LOG_WARN, "cumemtrace_mark_end(%d): no mark is active; call it once "
                          "per cumemtrace_mark_begin", which);
        return -1;
    }
    if (which != d) {
        pthread_mutex_unlock(&mark_lock);
        log_msg(LOG_WARN, "cumemtrace_mark_end(%d): the innermost mark is %d; end "
                          "marks in the reverse order of cumemtrace_mark_begin",
                which, d);
        return -1;
    }
    record_mark_restore(saved[d - 1]);
    __atomic_store_n(&depth, d - 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mark_lock);
    return 0;
}

__attribute__((visibility("default"))) int cumemtrace_usage(int device,
                                                            struct cumemtrace_usage *out)
{
    if (out == NULL || device < -1 || device >= RECORD_MAX_DEVICES)
        return -1;
    struct record_mark m;
    uint64_t current;
    bool active = record_mark_get(device, &m, &current);
    out->current_bytes = current;
    out->mark_bytes = m.base;
    out->peak_bytes = m.peak > current ? m.peak : current;
    out->mark_time_ns = m.time;
    out->peak_time_ns = m.peak_time;
    return active ? 1 : 0;
}
