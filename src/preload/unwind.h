/* unwind.h - native call stacks.  The only interface to libunwind. */
#ifndef CUMEMTRACE_UNWIND_H
#define CUMEMTRACE_UNWIND_H

/* Loads libunwind privately and warms it up.  Returns 0, or -1 when it is
 * not installed (stacks then come from glibc's backtrace(), slower). */
int unwind_init(void);

/* Stores up to `max` return addresses of the calling thread, innermost
 * first, skipping this library's own frames; returns how many.  No locks, no
 * allocation after unwind_init. */
unsigned unwind_capture(void **frames, unsigned max);

/* True if `addr` lies in this library's own code. */
int unwind_is_ours(const void *addr);

#endif
