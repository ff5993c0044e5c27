/* background.h - the library's own thread: serves termination signals,
 * flushes the stream and writes periodic snapshots (background.c). */
#ifndef CUMEMTRACE_BACKGROUND_H
#define CUMEMTRACE_BACKGROUND_H

#include <stdbool.h>

/* Starts the thread for this process (at its first CUDA call; again in a
 * fork child that calls CUDA).  Returns 0, or -1 after one warning. */
int background_start(void);


/* Holds the thread's work (waits at most ~2 s for the current flush or
 * dump to end), so that the caller owns the stream; true when held, and
 * then background_resume() gives it back. */
bool background_pause(void);
void background_resume(void);

/* At exit: as background_pause, and the thread does no more work; from
 * here a termination signal acts as without us.  True when held (the
 * stream may be touched). */
bool background_stop(void);

/* fork(): the child has no thread until it calls CUDA itself. */
void background_atfork_prepare(void);
void background_atfork_parent(void);
void background_atfork_child(void);

#endif
