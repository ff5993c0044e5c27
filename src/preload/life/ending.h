/* ending.h - the exit and exec snapshots (ending.c). */
#ifndef CUMEMTRACE_ENDING_H
#define CUMEMTRACE_ENDING_H

#include <stdbool.h>
#include <stddef.h>

/* At start-up, and in a fork child: the process our tables belong to,
 * with no ending snapshot written yet. */
void ending_init(void);
void ending_atfork_child(void);

/* Before an exec (hooks_exec.c): writes the snapshot of the image about to
 * be replaced (reason "exec"; not in a vfork child, not when `path` is
 * given and not executable) and stores its name in `written` ("" when
 * none); hooks_exec_failed removes it again, so the exit snapshot is
 * written later instead.  Both keep errno. */
void hooks_before_exec(const char *path, char *written, size_t n);
void hooks_exec_failed(const char *written);

/* The exit snapshot: from our atexit handler (python=false), or as a
 * Python host's program ends (python=true): its atexit through the PyTorch
 * layer (cumemtrace_exit_snapshot), else its Py_AtExit, which runs where an
 * interrupted interpreter re-raises SIGINT and no atexit handler follows.
 * Returns true when this call wrote the snapshot. */
bool hooks_write_exit_snapshot(bool python);

#endif
