/* init.c - start-up, the first CUDA call, fork handling and the public
 * API's dump.
 *
 * Start-up runs once (pthread_once): from our constructor, or from the first
 * wrapper if another library's constructor calls CUDA before ours ran.  It
 * holds the re-entry guard, so CUDA calls made while we initialise are passed
 * through untraced.  It sits above everything it starts: the wrappers reach
 * it only through hook_enter (hooks.h), and nothing it initialises calls
 * back into it (tests/e2e/test_link_cycles.py).
 *
 * Exit: an atexit handler registered at start-up writes the exit snapshot
 * (ending.c) from our tables only.  A process that never called a wrapper
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

#include "allocator_segments.h"
#include "allocator_tensors.h"
#include "background.h"
#include "clock.h"
#include "config.h"
#include "cumemtrace.h"
#include "torch_protocol.h"
#include "dump_guard.h"
#include "ending.h"
#include "format.h"
#include "hooks.h"
#include "log.h"
#include "oom.h"
#include "output.h"
#include "periodic.h"
#include "phases.h"
#include "python.h"
#include "record.h"
#include "signals.h"
#include "snapshot_write.h"
#include "stream.h"
#include "torch_layer.h"
#include "unwind.h"

static void fast_path_allow(int why)
{
    __atomic_and_fetch(&hooks_slow, ~why, __ATOMIC_RELEASE);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Not reset in a fork child: it inherits what its parent checked and said. */
static int first_touch_done;

/* What only a CUDA process needs, kept out of the constructor that every
 * process runs (a shell script's thousand `true`s): the TSC's calibration
 * and the native unwinder's set-up (libgcc_s's load and first unwind).
 * Once per process lineage - a fork child has both. */
static pthread_once_t first_call_once = PTHREAD_ONCE_INIT;

static void first_call_init(void)
{
    clock_calibrate();
    unwind_init();
}

void hooks_first_touch(void)
{
    if (!hooks_enabled) {
        __atomic_store_n(&hooks_touched, 1, __ATOMIC_RELEASE);
        return;
    }
    int saved = errno; /* the host never sees ours */
    /* before hooks_touched is set: a thread that sees it set (acquire, in
     * hook_enter) sees the unwinder ready */
    pthread_once(&first_call_once, first_call_init);
    if (__atomic_exchange_n(&hooks_touched, 1, __ATOMIC_ACQ_REL)) {
        errno = saved;
        return;
    }
    if (!__atomic_exchange_n(&first_touch_done, 1, __ATOMIC_ACQ_REL)) {
        output_read_rank();
        config_report_warnings();
        output_prepare();
    }
    /* Per process, a fork child included: each says it used CUDA
     * (CUMEMTRACE_MANIFEST) and gets its own thread and handlers. */
    output_manifest_cuda();
    background_start();
    signals_install();
    fast_path_allow(HOOKS_SLOW_UNTOUCHED);
    errno = saved;
}

static void at_exit(void)
{
    hooks_write_exit_snapshot(false);
}

/* A Python host's Py_AtExit (signals.c registers it). */
static void at_python_exit(void)
{
    hooks_write_exit_snapshot(true);
}

static void fork_prepare(void)
{
    hooks_depth++; /* a signal now waits for the fork, not in the handler */
    background_atfork_prepare();
    phase_atfork_prepare();
    record_atfork_prepare();
}

static void fork_parent(void)
{
    record_atfork_parent();
    phase_atfork_parent();
    background_atfork_parent();
    hooks_depth--;
}

static void fork_child(void)
{
    record_atfork_child();
    phase_atfork_child();
    background_atfork_child();
    oom_atfork_child();
    allocator_segments_atfork_child();
    allocator_tensors_atfork_child();
    hooks_context_atfork_child();
    periodic_atfork_child();
    stream_atfork_child();
    dump_guard_atfork_child();
    torch_layer_atfork_child();
    hooks_touched = 0;
    hooks_dump_requested = 0;
    /* record_atfork_child forgot this thread's id, which a known thread's
     * fast path counts on: its next call starts it again */
    hooks_thread_known = false;
    __atomic_or_fetch(&hooks_slow, HOOKS_SLOW_UNTOUCHED, __ATOMIC_RELAXED);
    ending_atfork_child();
    hooks_depth--;
}

static void on_dump_signal(int sig)
{
    (void)sig;
    /* Our thread writes it, with PyTorch's figures refreshed first; before
     * it runs, the next wrapper does, outside locks. */
    if (signals_ask_dump())
        return;
    hooks_dump_requested = 1;
    __atomic_or_fetch(&hooks_slow, HOOKS_SLOW_DUMP, __ATOMIC_RELEASE); /* lock-free */
}

void hooks_service_dump_request(void)
{
    char b[24];
    /* before taking the request: one arriving after it sets the bit again */
    fast_path_allow(HOOKS_SLOW_DUMP);
    if (__atomic_exchange_n(&hooks_dump_requested, 0, __ATOMIC_ACQ_REL))
        snapshot_write_signal(signals_name(config.dump_signal, b, sizeof b), NULL, 0);
}

static void init(void)
{
    hooks_depth++;
    hooks_exec_init();
    ending_init();
    clock_init();

    config_load();
    if (config.disabled) {
        __atomic_store_n(&hooks_ready, 1, __ATOMIC_RELEASE);
        hooks_depth--;
        return;
    }
    record_init(config.event_cap, clock_now_ns);
    /* 9e12 ms (285 years) keeps the nanoseconds in an int64_t */
    record_set_temporary((int64_t)((config.temporary_ms < 9000000000000u
                                        ? config.temporary_ms : 9000000000000u) * 1000000u));
    call_state_init();
    output_init();
    python_init();
    torch_layer_watch_imports();
    if (python_wanted()) /* the peak's frames, for the PyTorch layer (record_peak.c) */
        __atomic_store_n(&record_peak_selves, python_selves, __ATOMIC_RELEASE);
    signals_init(at_python_exit);
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
    fast_path_allow(HOOKS_SLOW_INIT);
    hooks_depth--;
}

void hooks_init_once(void)
{
    pthread_once(&once, init);
}

__attribute__((constructor)) static void cumemtrace_load(void)
{
    torch_layer_python_env(); /* before the interpreter reads its environment */
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
    torch_layer_refresh(false); /* none of our locks held */
    /* A termination signal being served waits for the dumps in progress,
     * then writes its own and ends the process: none may start meanwhile
     * (dump_guard.h), or a thread dumping back to back holds the end off
     * for the whole wait and leaves a temporary as the process ends. */
    struct dump_guard g;
    if (!dump_guard_enter_unless_closing(&g)) {
        hooks_depth--;
        return -1;
    }
    int r = snapshot_write("api", path, NULL, NULL, 0);
    dump_guard_leave(&g);
    hooks_depth--;
    return r;
}

__attribute__((visibility("default"))) int cumemtrace_exit_snapshot(void)
{
    if (!hooks_enabled)
        return -1;
    return hooks_write_exit_snapshot(true) ? 0 : -1;
}

__attribute__((visibility("default"))) const char *cumemtrace_version(void)
{
    return FORMAT_TOOL_VERSION;
}
