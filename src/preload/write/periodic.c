/* periodic.c - a snapshot every CUMEMTRACE_INTERVAL for long jobs that want
 * to watch memory grow.  Only the last CUMEMTRACE_INTERVAL_KEEP files stay:
 * each new one removes the file written K dumps before it, and only a file
 * this process wrote itself (its name is remembered, never guessed). */
#include "periodic.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "snapshot_write.h"

static char (*ring)[4200]; /* the last K names, ring[n % K] */
static unsigned written;

void periodic_dump(void)
{
    unsigned k = config.interval_keep;
    if (ring == NULL && (ring = calloc(k, sizeof *ring)) == NULL)
        return;
    char path[4200];
    if (snapshot_write("periodic", NULL, NULL, path, sizeof path) != 0)
        return;
    char *slot = ring[written % k];
    if (written >= k && slot[0] != '\0' && strcmp(slot, path) != 0)
        unlink(slot);
    memcpy(slot, path, sizeof path);
    written++;
}

void periodic_atfork_child(void)
{
    written = 0;
    if (ring != NULL)
        memset(ring, 0, config.interval_keep * sizeof *ring);
}
