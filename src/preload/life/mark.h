/* mark.h - the mark API of include/cumemtrace.h (mark.c), as the snapshot
 * writer needs it. */
#ifndef CUMEMTRACE_MARK_H
#define CUMEMTRACE_MARK_H

/* How many marks are active now (0: none). */
int mark_depth(void);

#endif
