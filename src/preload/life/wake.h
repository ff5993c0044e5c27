/* wake.h - the pipe the library's thread sleeps on, and whether that
 * thread runs in this process (wake.c).  Below both the thread
 * (background.c) and the signal handler that wakes it (signals.c). */
#ifndef CUMEMTRACE_WAKE_H
#define CUMEMTRACE_WAKE_H

#include <stdbool.h>

/* A new pipe for this process (an inherited one is closed first).
 * Returns 0, or -1 with errno set. */
int wake_open(void);
/* Closes the pipe (the thread could not start). */
void wake_close(void);
/* The end the thread polls, -1 none. */
int wake_fd(void);
/* Empties the pipe after a wake-up. */
void wake_drain(void);

/* The thread runs in this process from wake_arm until wake_disarm. */
void wake_arm(void);
void wake_disarm(void);
/* True in the process whose thread runs.  Async-signal-safe. */
bool wake_armed(void);
/* Wakes the thread now.  Async-signal-safe (one write(2) to a pipe). */
void wake_post(void);

#endif
