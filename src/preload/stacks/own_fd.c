/* own_fd.c - descriptors the library keeps, kept out of the host's way.
 *
 * A host may close every descriptor above 2 and open its own files, or
 * dup2() its log onto a low number: a descriptor of ours at such a number
 * would then write our bytes into the host's file.  So each one we keep is
 * moved high (as profilers do: the lowest free number is what open() hands
 * the host) and its identity (device, inode) is checked before each use; a
 * number that no longer holds our file is forgotten, never written to and
 * never closed.
 *
 * "High" is OWN_FD_ROOM below the open-file limit, and never above 1024:
 * the kernel sizes a process's descriptor table by its highest number, so a
 * limit of a million must not cost the host a table of a million slots.
 * Under a limit below OWN_FD_MIN_LIMIT there is no number the host would
 * not reach: a descriptor stays where it is (and still checked).
 * Limitation: a host thread that dup2()s onto a number between our check
 * and our use is not seen (the check and the use are two system calls).
 */
#include "own_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define OWN_FD_ROOM 16       /* numbers left free at the top for the host */
#define OWN_FD_CAP 1024      /* the highest number we place at */
#define OWN_FD_MIN_LIMIT 256 /* below this no number is out of the host's way */

/* The number to place at, or -1 when the limit leaves no room. */
static int high_number(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur < OWN_FD_MIN_LIMIT)
        return -1;
    rlim_t top = r.rlim_cur < OWN_FD_CAP ? r.rlim_cur : OWN_FD_CAP;
    return (int)(top - OWN_FD_ROOM);
}

int own_fd_high(int fd)
{
    int high = high_number();
    if (fd >= 0 && high > 0 && fd < high) {
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, high);
        if (moved >= 0) {
            close(fd);
            fd = moved;
        }
    }
    return fd;
}

int own_fd_take(struct own_fd *o, int fd)
{
    fd = own_fd_high(fd);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0) {
        close(fd);
        fd = -1;
    }
    o->fd = fd;
    if (fd >= 0) {
        o->dev = st.st_dev;
        o->ino = st.st_ino;
    }
    return fd;
}

int own_fd_check(struct own_fd *o)
{
    struct stat st;
    if (o->fd >= 0 &&
        (fstat(o->fd, &st) != 0 || st.st_dev != o->dev || st.st_ino != o->ino))
        o->fd = -1;
    return o->fd;
}

void own_fd_close(struct own_fd *o)
{
    if (own_fd_check(o) >= 0)
        close(o->fd);
    o->fd = -1;
}
