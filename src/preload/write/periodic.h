/* periodic.h - CUMEMTRACE_INTERVAL snapshots, the last K kept (periodic.c). */
#ifndef CUMEMTRACE_PERIODIC_H
#define CUMEMTRACE_PERIODIC_H

/* Writes "<name>.periodic.<n>.json" and removes the one written K dumps
 * before (CUMEMTRACE_INTERVAL_KEEP).  Background thread only. */
void periodic_dump(void);

/* fork child: its own files from 0. */
void periodic_atfork_child(void);

#endif
