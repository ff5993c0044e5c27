/* moment.c - when a snapshot was taken, named by its `reason`
 * (docs/snapshot-format.md), so that two dumps of one run compared by
 * `diff` read as what they are (two api dumps), not both as "exit". */
#include "moment.h"

#include <stdio.h>
#include <string.h>

const char *moment_of(const struct snapshot *s, char *buf, size_t n)
{
    const char *r = s->reason ? snapshot_display(s->ctx, s->reason) : "?";
    if (s->oom.present || strcmp(r, "oom") == 0)
        snprintf(buf, n, "at its OOM");
    else if (strcmp(r, "exit") == 0)
        snprintf(buf, n, "at exit");
    else if (strcmp(r, "exec") == 0)
        snprintf(buf, n, "before its exec");
    else if (strcmp(r, "stream") == 0)
        snprintf(buf, n, "at its stream checkpoint");
    else if (strcmp(r, "killed") == 0)
        snprintf(buf, n, "at its last checkpoint (killed)");
    else if (strcmp(r, "signal") == 0 && s->signal != NULL)
        snprintf(buf, n, "at its signal dump (%s)", snapshot_display(s->ctx, s->signal));
    else
        snprintf(buf, n, "at its %s dump", r);
    return buf;
}

bool moment_same_run(const struct snapshot *a, const struct snapshot *b)
{
    const struct snap_process *x = &a->process, *y = &b->process;
    /* A process writes one exit snapshot: two are two runs (or one file
     * twice), whatever their pids say. */
    bool exits = a->reason && b->reason && strcmp(a->reason, "exit") == 0 &&
                 strcmp(b->reason, "exit") == 0;
    return !exits && x->pid != SNAP_UNKNOWN_I64 && x->pid == y->pid &&
           x->start_wall_ns != SNAP_UNKNOWN_I64 && x->start_wall_ns == y->start_wall_ns;
}
