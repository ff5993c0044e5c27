/* unwind.h - native call stacks: the frame-rule walk, else backtrace(). */
#ifndef CUMEMTRACE_UNWIND_H
#define CUMEMTRACE_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

/* Finds this library's code, the main stack's top and the frame rules'
 * lookup, and loads libgcc_s (backtrace()'s unwinder) now, not in a hook. */
void unwind_init(void);

/* Stores up to `max` return addresses of the calling thread, innermost
 * first, skipping this library's own frames; returns how many.  `from`:
 * NULL, or the frame address of a function of ours further out that has a
 * frame pointer (a wrapper's HOOK_FRAME()): the walk then starts at its
 * caller.  No locks, no allocation after unwind_init. */
unsigned unwind_capture(void **frames, unsigned max, const void *from);

/* The frame-rule walk (unwind.c), for tests: up to `max` return addresses
 * from the frame whose caller resumes at `pc` with stack pointer `sp` and
 * rbp `rbp`, reading nothing outside [sp, top).  Returns how many, or -1
 * when the stack needs backtrace().  x86-64 only. */
int unwind_walk(void **out, unsigned max, uintptr_t pc, uintptr_t sp,
                uintptr_t rbp, uintptr_t top);

/* Makes every capture end at the first return address in [lo, hi), kept:
 * python.c passes the interpreter's evaluator when its Python frames
 * replace all evaluation frames and what lies beyond them (CPython 3.11+).
 * Once, before or while captures run; 0, 0 (the default): no end. */
void unwind_stop_at(uintptr_t lo, uintptr_t hi);

#endif
