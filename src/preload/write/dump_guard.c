/* dump_guard.c - see dump_guard.h.  Two system calls each way
 * (sigprocmask, and pthread_setcancelstate's atomic) against a dump's
 * milliseconds. */
#include "dump_guard.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static int active;

static int closing; /* a termination signal is being served */

static void block(struct dump_guard *g)
{
    int saved = errno;
    sigset_t all;
    sigfillset(&all);
    /* faults raised by the dump itself go to the host's handler as before */
    static const int sync[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    for (unsigned i = 0; i < sizeof sync / sizeof sync[0]; i++)
        sigdelset(&all, sync[i]);
    pthread_sigmask(SIG_BLOCK, &all, &g->mask);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &g->cancel);
    errno = saved;
}

void dump_guard_enter(struct dump_guard *g)
{
    block(g);
    __atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
}

bool dump_guard_enter_unless_closing(struct dump_guard *g)
{
    /* counted before looking, and dump_guard_close sets the flag before
     * its wait looks at the count: either the wait sees this dump or this
     * dump sees the flag (both sequentially consistent) */
    __atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&closing, __ATOMIC_SEQ_CST)) {
        __atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
        return false;
    }
    block(g);
    return true;
}

void dump_guard_close(void)
{
    __atomic_store_n(&closing, 1, __ATOMIC_SEQ_CST);
}

void dump_guard_leave(struct dump_guard *g)
{
    int saved = errno;
    __atomic_sub_fetch(&active, 1, __ATOMIC_ACQ_REL);
    int ignored;
    pthread_setcancelstate(g->cancel, &ignored);
    /* a signal that waited is delivered here, a cancel at the host's next
     * cancellation point */
    pthread_sigmask(SIG_SETMASK, &g->mask, NULL);
    errno = saved;
}

/* Dumps in progress in the process, any thread.  Async-signal-safe. */
static int dump_guard_active(void)
{
    return __atomic_load_n(&active, __ATOMIC_SEQ_CST);
}

bool dump_guard_wait(int ms)
{
    struct timespec one = {0, 1000000};
    for (int i = 0; i < ms && dump_guard_active() > 0; i++)
        nanosleep(&one, NULL);
    return dump_guard_active() == 0;
}

void dump_guard_atfork_child(void)
{
    __atomic_store_n(&active, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&closing, 0, __ATOMIC_RELEASE);
}
