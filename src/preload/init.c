/* init.c - start-up, exit snapshot, fork handling and the public API.
 *
 * Start-up runs once (pthread_once): from our constructor, or from the first
 * wrapper if another library's constructor calls CUDA before ours ran.  It
 * holds the re-entry guard, so CUDA calls made while we initialise are passed
 * through untraced.
 *
 * Exit: an atexit handler registered at start-up writes the exit snapshot
 * from our tables only - it never calls CUDA, whose own exit handlers may
 * already have torn the driver down.  A process that never called a wrapper
 * writes nothing (DataLoader workers, shell wrappers).
 *
 * Fork: the tracker lock is taken across fork() and the child starts with
 * empty tables and no held lock.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "cumemtrace.h"
#include "hooks.h"
#include "log.h"
#include "oom.h"
#include "output.h"
#include "python.h"
#include "record.h"
#include "snapshot_write.h"
#include "unwind.h"

int hooks_ready, hooks_touched;
volatile int hooks_dump_requested;
bool hooks_enabled;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int exit_written;
/* Not reset in a fork child: it inherits what its parent checked and said. */
static int first_touch_done;

void hooks_first_touch(void)
{
    if (__atomic_exchange_n(&hooks_touched, 1, __ATOMIC_ACQ_REL) || !hooks_enabled ||
        __atomic_exchange_n(&first_touch_done, 1, __ATOMIC_ACQ_REL))
        return;
    int saved = errno; /* the host never sees ours */
    output_read_rank();
    config_report_warnings();
    output_prepare();
    errno = saved;
}

static void at_exit(void)
{
    if (!hooks_enabled)
        return;
    hooks_depth++;
    if (__atomic_load_n(&hooks_touched, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&exit_written, 1, __ATOMIC_ACQ_REL)) {
        oom_at_exit(clock_now_ns());
        snapshot_write("exit", NULL, NULL, NULL, 0);
    }
    resolve_log_summary();
    hooks_depth--;
}

/* The process our tables belong to: a vfork child (no atfork handlers run,
 * our memory shared) has another pid and must write nothing. */
static pid_t owner_pid;

void hooks_before_exec(const char *path, char *written, size_t n)
{
    written[0] = '\0';
    if (!hooks_enabled || hooks_depth != 0 ||
        !__atomic_load_n(&hooks_touched, __ATOMIC_RELAXED) || getpid() != owner_pid)
        return;
    int saved = errno;
    /* an exec that cannot succeed (Python's os.execvp tries each PATH entry) */
    if (path == NULL || access(path, X_OK) == 0) {
        hooks_depth++;
        if (!__atomic_exchange_n(&exit_written, 1, __ATOMIC_ACQ_REL)) {
            oom_at_exit(clock_now_ns());
            /* a name that filled the buffer may be cut: never removed */
            if (snapshot_write("exec", NULL, NULL, written, n) != 0 ||
                strlen(written) + 1 >= n) {
                written[0] = '\0';
                __atomic_store_n(&exit_written, 0, __ATOMIC_RELEASE);
            }
        }
        hooks_depth--;
    }
    errno = saved;
}

void hooks_exec_failed(const char *written)
{
    if (written[0] == '\0')
        return;
    unlink(written); /* the image goes on: its exit snapshot will say more */
    __atomic_store_n(&exit_written, 0, __ATOMIC_RELEASE);
}

static void fork_prepare(void)
{
    record_atfork_prepare();
}

static void fork_parent(void)
{
    record_atfork_parent();
}

static void fork_child(void)
{
    record_atfork_child();
    oom_atfork_child();
    hooks_context_atfork_child();
    hooks_touched = 0;
    hooks_dump_requested = 0;
    exit_written = 0;
    owner_pid = getpid();
}

static void on_dump_signal(int sig)
{
    (void)sig;
    hooks_dump_requested = 1; /* served by the next wrapper, outside locks */
}

void hooks_service_dump_request(void)
{
    if (__atomic_exchange_n(&hooks_dump_requested, 0, __ATOMIC_ACQ_REL))
        snapshot_write("signal", NULL, NULL, NULL, 0);
}

static void init(void)
{
    hooks_depth++;
    hooks_exec_init();
    owner_pid = getpid();
    clock_init();

    config_load();
    if (config.disabled) {
        __atomic_store_n(&hooks_ready, 1, __ATOMIC_RELEASE);
        hooks_depth--;
        return;
    }
    record_init(config.event_cap, clock_now_ns);
    hooks_thread_init();
    output_init();
    unwind_init();
    python_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(at_exit);
    if (config.dump_signal != 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_dump_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(config.dump_signal, &sa, NULL);
    }
    hooks_enabled = true;
    __atomic_store_n(&hooks_ready, 1, __ATOMIC_RELEASE);
    hooks_depth--;
}

void hooks_init_once(void)
{
    pthread_once(&once, init);
}

__attribute__((constructor)) static void cumemtrace_load(void)
{
    hooks_init_once();
}

/* ---- public API (include/cumemtrace.h) ---- */

__attribute__((visibility("default"))) int cumemtrace_dump(const char *path)
{
    hooks_init_once();
    if (!hooks_enabled) {
        log_msg(LOG_WARN, "cumemtrace_dump: tracing is disabled "
                          "(CUMEMTRACE_DISABLE is set); no snapshot written");
        return -1;
    }
    hooks_depth++;
    int r = snapshot_write("api", path, NULL, NULL, 0);
    hooks_depth--;
    return r;
}

__attribute__((visibility("default"))) const char *cumemtrace_version(void)
{
    return "0.1.0";
}
