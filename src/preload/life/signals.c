/* signals.c - never lose the record to a termination signal.
 *
 * SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGXCPU end a process without its
 * atexit handlers: SLURM's time limit, torchrun tearing down the ranks,
 * Ctrl-C.  Where such a signal's action is still the default at the
 * process's first CUDA call, we install a handler that gets the snapshot
 * written and then lets the signal do what it would have done: it restores
 * SIG_DFL and re-raises, so the exit status (and core dump) is the one an
 * untraced run gets.
 *
 * The handler does almost nothing itself, because it may interrupt a thread
 * holding any lock (ours, malloc's, the loader's).  It records the signal,
 * wakes our background thread (one sem_post(3)) and waits, at most
 * SIGNALS_WAIT_MS, polling a flag with nanosleep(2); the thread, which holds
 * no lock of the interrupted thread, writes the snapshot.  If the
 * interrupted thread is inside one of our hooks or dumps (hooks_depth > 0)
 * it may hold the tracker's lock the dump needs, and while it looks up a
 * real function (resolve_depth > 0: a wrapper's first call does so before
 * it enters the bookkeeping) it may hold the loader's locks, which the
 * dump's walk of the loaded objects (dl_iterate_phdr) takes.  The handler then returns at once, the thread finishes and
 * releases the lock, and the background thread ends the process after the
 * dump.  (Waiting instead, the dump stalled for the whole wait and the
 * process ended without a snapshot.)  Snapshots go through a temporary file and a
 * rename, so a signal in the middle of any dump leaves either a complete
 * file or none (the stale temporary is removed by the next run).
 *
 * Host handlers (docs/design.md, "Termination signals"): a signal whose
 * action is not the default when we look (Python's SIGINT handler, a
 * framework's SIGTERM handler, SIG_IGN from nohup) is left alone; one
 * installed after us replaces ours, as sigaction always does.  Either way
 * the host's handler runs exactly as before, and the record comes from the
 * exit snapshot when the host exits, or from the stream (stream.c) when it
 * restores the default and re-raises.  Python is the common case of the
 * latter: an unhandled KeyboardInterrupt ends the interpreter by restoring
 * SIG_DFL and re-raising SIGINT after Py_FinalizeEx, where no C atexit
 * handler runs; we register with Py_AtExit, which runs at the end of
 * Py_FinalizeEx, and write the exit snapshot there.
 */
#include "signals.h"

#include <errno.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "dump_guard.h"
#include "hooks.h"
#include "oom.h"
#include "resolve.h"
#include "snapshot_write.h"
#include "stream.h"
#include "torch_layer.h"
#include "wake.h"

#define SIGNALS_WAIT_MS 5000

static const int term_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGXCPU};
#define NTERM (sizeof term_signals / sizeof term_signals[0])

static int pending; /* the signal being served, 0 none */
static int served;  /* its snapshot is written (or given up) */

const char *signals_name(int sig, char *buf, unsigned len)
{
    static const struct { int sig; const char *name; } names[] = {
        {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}, {SIGHUP, "SIGHUP"},
        {SIGQUIT, "SIGQUIT"}, {SIGXCPU, "SIGXCPU"}, {SIGUSR1, "SIGUSR1"},
        {SIGUSR2, "SIGUSR2"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, len, "signal %d", sig);
    return buf;
}

/* Gives `sig` its default action.  Async-signal-safe. */
static void set_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
}

/* Gives `sig` its default action and delivers it to this thread.  Only
 * async-signal-safe calls. */
static void die(int sig)
{
    set_default(sig);
    raise(sig); /* pending while the handler blocks it */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL); /* delivered here: the process ends */
}

static void on_term(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    int saved = errno;
    if (!wake_armed()) {
        /* No thread to serve us (the exit path stopped it): a snapshot
         * being written - the exit snapshot - is finished first, at most
         * SIGNALS_WAIT_MS.  Its own thread blocks the signal meanwhile. */
        dump_guard_wait(SIGNALS_WAIT_MS);
    } else {
        int none = 0;
        if (__atomic_compare_exchange_n(&pending, &none, sig, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            wake_post();
        if (hooks_depth != 0 || resolve_depth != 0 || torch_layer_main_thread_answers()) {
            /* We may hold a lock the dump needs: let the call finish.  Or
             * this is Python's main thread, which the dump asks for
             * PyTorch's figures: it answers between two bytecodes and then
             * waits there for the end (torch_layer.c). */
            errno = saved;
            return;
        }
        struct timespec ms = {0, 1000000};
        for (int i = 0; i < SIGNALS_WAIT_MS && !__atomic_load_n(&served, __ATOMIC_ACQUIRE); i++)
            nanosleep(&ms, NULL);
    }
    die(sig);
    errno = saved;
}

/* CUMEMTRACE_SIGNAL's request, for the background thread. */
static int dump_asked;

bool signals_ask_dump(void)
{
    if (!wake_armed())
        return false;
    __atomic_store_n(&dump_asked, 1, __ATOMIC_RELEASE);
    wake_post();
    return true;
}

bool signals_dump_asked(void)
{
    return __atomic_load_n(&dump_asked, __ATOMIC_ACQUIRE) != 0;
}

void signals_serve_dump_request(void)
{
    /* every signal that came since the last dump is answered by this one */
    if (!__atomic_load_n(&dump_asked, __ATOMIC_ACQUIRE) ||
        !__atomic_exchange_n(&dump_asked, 0, __ATOMIC_ACQ_REL))
        return;
    char b[24];
    torch_layer_refresh(false);
    snapshot_write_signal(signals_name(config.dump_signal, b, sizeof b), NULL, 0);
}

bool signals_pending(void)
{
    return __atomic_load_n(&pending, __ATOMIC_ACQUIRE) != 0;
}

void signals_serve(void)
{
    int sig = __atomic_load_n(&pending, __ATOMIC_ACQUIRE);
    char b[24];
    /* A post-mortem or the exit snapshot being written on another thread
     * (signals blocked there) is finished and counted first, within the
     * handler's wait; then this snapshot lists it. */
    dump_guard_close(); /* no API dump starts from here: the wait ends */
    dump_guard_wait(SIGNALS_WAIT_MS - 1000);
    torch_layer_refresh(true);
    oom_at_exit(clock_now_ns());
    stream_finish(snapshot_write_signal(signals_name(sig, b, sizeof b), NULL, 0) == 0);
    __atomic_store_n(&served, 1, __ATOMIC_RELEASE);
    /* The handler's thread re-raises when it wakes; a thread that returned
     * from the handler (it was inside a hook) does not, so we do: the
     * signal is process-directed and every thread but ours takes it. */
    set_default(sig);
    kill(getpid(), sig);
    for (;;)
        pause(); /* every signal is blocked here: the process ends around us */
}

/* ---- Python ends an unhandled KeyboardInterrupt by re-raising SIGINT ---- */

/* What a Python host's Py_AtExit runs: the exit snapshot, handed in by
 * start-up (signals_init), which this file never calls. */
static void (*python_exit_hook)(void);

/* Looked up at load time, as python.c does: dlsym inside a wrapper could
 * deadlock on the loader lock (python.c, top).  A libpython dlopen()ed
 * later is not seen: its SIGINT re-raise then leaves the stream. */
static int (*py_is_initialized)(void);
static int (*py_at_exit)(void (*)(void));

void signals_init(void (*at_python_exit)(void))
{
    python_exit_hook = at_python_exit;
    *(void **)&py_is_initialized = resolve_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    *(void **)&py_at_exit = resolve_dlsym(RTLD_DEFAULT, "Py_AtExit");
}

static void python_register(void)
{
    static int registered;
    /* Before Py_Initialize the registration would be wiped with the
     * runtime's state; a CUDA call made before it is a C host's. */
    if (py_is_initialized == NULL || py_at_exit == NULL || !py_is_initialized() ||
        __atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL))
        return;
    py_at_exit(python_exit_hook);
}

void signals_install(void)
{
    python_register();
    /* pid 1 of a namespace: the kernel drops default-action signals sent to
     * it from inside, so "the default" is not to end at all. */
    if (!config.term_signals || !wake_armed() || getpid() == 1)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_term;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NTERM; i++)
        sigaddset(&sa.sa_mask, term_signals[i]);
    for (size_t i = 0; i < NTERM; i++) {
        struct sigaction old;
        if (sigaction(term_signals[i], NULL, &old) != 0)
            continue;
        bool dfl = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
        if (dfl)
            sigaction(term_signals[i], &sa, NULL);
    }
}
