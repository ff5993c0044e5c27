/* ending.c - the snapshot an image writes as it ends: at exit (start-up's
 * atexit handler, or a Python host's Py_AtExit, which runs where an
 * interrupted interpreter re-raises SIGINT and no atexit handler follows),
 * or before an exec replaces it (the exec family, hooks_exec.c).
 *
 * One per image: the exec snapshot stands for the exit one unless the exec
 * fails, and a Python host's exit snapshot is rewritten by the C exit only
 * if something was allocated since: the frees between the end of the
 * program's code and the process's exit are the interpreter's teardown
 * (with numpy loaded, CPython's module teardown frees every tensor a script
 * kept to its end, so "live at exit" would always read 0).  Exit writes from our tables only - it never
 * calls CUDA, whose own exit handlers may already have torn the driver
 * down.  A process that never called a wrapper writes nothing.
 *
 * Start-up (init.c) registers these; nothing here calls back into it.
 */
#include "ending.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "background.h"
#include "clock.h"
#include "dump_guard.h"
#include "hooks.h"
#include "oom.h"
#include "record.h"
#include "resolve.h"
#include "snapshot_write.h"
#include "stream.h"

static int exit_written;

/* Set when a Python host's end wrote the exit snapshot: the C exit
 * rewrites it only if something was allocated since. */
static char python_exit_path[4200];
static uint64_t python_exit_allocs;

bool hooks_write_exit_snapshot(bool python)
{
    bool wrote = false;
    if (!hooks_enabled)
        return false;
    hooks_depth++;
    /* The stream is the thread's: touched only while its work is held. */
    bool held = python ? background_pause() : background_stop();
    /* A termination signal now waits for the snapshot and the stream's
     * removal (dump_guard.h, signals.c), instead of ending the process
     * half-way with a temporary left. */
    struct dump_guard g;
    dump_guard_enter(&g);
    if (__atomic_load_n(&hooks_touched, __ATOMIC_RELAXED)) {
        if (!__atomic_exchange_n(&exit_written, 1, __ATOMIC_ACQ_REL)) {
            oom_at_exit(clock_now_ns());
            wrote = true;
            /* a Python host's: kept, for the C exit to rewrite */
            int rc = snapshot_write("exit", NULL, NULL, python ? python_exit_path : NULL,
                                    python ? sizeof python_exit_path : 0);
            if (python)
                python_exit_allocs = record_allocations();
            if (held)
                stream_finish(rc == 0);
        } else if (!python && python_exit_path[0] != '\0' &&
                   record_allocations() != python_exit_allocs) {
            oom_at_exit(clock_now_ns());
            snapshot_rewrite("exit", python_exit_path);
        }
    }
    if (python && held)
        background_resume();
    if (!python)
        resolve_log_summary();
    dump_guard_leave(&g);
    hooks_depth--;
    return wrote;
}

/* The process our tables belong to: a vfork child (no atfork handlers run,
 * our memory shared) has another pid and must write nothing. */
static pid_t owner_pid;
static bool exec_paused; /* the background thread waits for the exec */

void ending_init(void)
{
    owner_pid = getpid();
}

void ending_atfork_child(void)
{
    exit_written = 0;
    owner_pid = getpid();
    python_exit_path[0] = '\0';
}

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
            } else if ((exec_paused = background_pause())) {
                stream_finish(true); /* the exec snapshot is the record */
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
    if (exec_paused) {
        exec_paused = false;
        background_resume(); /* without its stream, finished at the exec */
    }
}
