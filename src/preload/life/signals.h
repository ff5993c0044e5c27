/* signals.h - a snapshot before a termination signal ends the process, and
 * before Python ends itself by re-raising SIGINT (signals.c). */
#ifndef CUMEMTRACE_SIGNALS_H
#define CUMEMTRACE_SIGNALS_H

#include <stdbool.h>

/* At load time: finds CPython's Py_AtExit, if the host is Python, and
 * keeps what it should run there (the exit snapshot; start-up passes it,
 * so this file calls nothing of start-up's). */
void signals_init(void (*at_python_exit)(void));

/* At the process's first CUDA call, after background_start: takes over
 * SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGXCPU where their action is still
 * the default, and registers the Python exit hook in a Python host. */
void signals_install(void);

/* The background thread's side: a signal waits for its snapshot. */
bool signals_pending(void);
/* Writes the snapshot (reason "signal") and ends the process as the signal
 * would have.  Does not return. */
void signals_serve(void);

/* CUMEMTRACE_SIGNAL's handler (async-signal-safe): hands the dump to the
 * background thread; false when it does not run (the next wrapper serves
 * it then, init.c). */
bool signals_ask_dump(void);
/* The background thread's side: writes that dump (reason "signal", with
 * PyTorch's figures refreshed first) when one was asked for. */
void signals_serve_dump_request(void);
/* Whether such a dump is asked for and not yet written. */
bool signals_dump_asked(void);

/* "SIGTERM" for SIGTERM; "signal <n>" in buf for others. */
const char *signals_name(int sig, char *buf, unsigned len);

#endif
