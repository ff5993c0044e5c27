/* wake.h - the semaphore the library's thread sleeps on, and whether that
 * thread runs in this process (wake.c).  Below both the thread
 * (background.c) and the signal handler that wakes it (signals.c). */
#ifndef CUMEMTRACE_WAKE_H
#define CUMEMTRACE_WAKE_H

#include <stdbool.h>

/* Sets up this process's semaphore (an inherited one starts afresh);
 * before the thread starts.  Takes no descriptor. */
void wake_open(void);
/* The thread's sleep: returns after a wake_post, or after timeout_ms (-1:
 * no limit), having taken every post made so far. */
void wake_wait(int timeout_ms);

/* The thread runs in this process from wake_arm until wake_disarm. */
void wake_arm(void);
void wake_disarm(void);
/* True in the process whose thread runs.  Async-signal-safe. */
bool wake_armed(void);
/* Wakes the thread now.  Async-signal-safe (one sem_post). */
void wake_post(void);

#endif
