/* dump_guard.h - a thread writing a snapshot is not interrupted by the host.
 *
 * A dump takes the tracker's lock to copy its state and writes a temporary
 * file for milliseconds to seconds (with the live allocations).  A host signal
 * handler that runs in the middle and leaves by pthread_exit() or
 * longjmp() would leave the lock held (every thread then hangs in
 * record_lock_wait) and the temporary behind; a deferred pthread_cancel
 * acts at the dump's first write(2), with the same result, and a
 * termination signal's default action ends the process half-way.  So
 * while a dump runs its thread blocks every signal that can be blocked
 * except the synchronous ones (a fault inside the dump must still reach
 * the host's crash handler) and disables cancellation; both come back as
 * they were at the end, where a pending signal or cancel takes effect -
 * once the file is complete and no lock of ours is held.
 *
 * The count of dumps in progress lets a termination signal wait for them
 * (signals.c), bounded by its 5 s; once it waits, API dumps are refused.
 */
#ifndef CUMEMTRACE_DUMP_GUARD_H
#define CUMEMTRACE_DUMP_GUARD_H

#include <signal.h>
#include <stdbool.h>

struct dump_guard {
    sigset_t mask;  /* the thread's mask before */
    int cancel;     /* its cancel state before */
};

/* Brackets a dump in the calling thread; nests.  Keep errno. */
void dump_guard_enter(struct dump_guard *g);
void dump_guard_leave(struct dump_guard *g);
/* The same for a dump the process's end may refuse (cumemtrace_dump):
 * false, and nothing entered, once dump_guard_close was called. */
bool dump_guard_enter_unless_closing(struct dump_guard *g);
/* A termination signal is being served: from now on no refusable dump
 * starts, so that waiting for the dumps in progress ends (a thread dumping
 * back to back otherwise always has one) and none is cut by the end. */
void dump_guard_close(void);
/* Waits until no dump is in progress, at most `ms` milliseconds (1 ms
 * polls, nanosleep: async-signal-safe); true when none is. */
bool dump_guard_wait(int ms);
/* A fork child runs none of its parent's other threads' dumps. */
void dump_guard_atfork_child(void);

#endif
