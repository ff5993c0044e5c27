/* wake.c - the pipe the library's thread sleeps on.
 *
 * A signal handler wakes the thread with one write(2), the only thing it
 * may do; the thread drains the pipe and looks at what is pending.  The
 * owner pid makes a fork child, which inherits the pipe but not the
 * thread, see no thread until it starts its own.
 * Threads: the write end and the owner are read with atomic loads from
 * any thread or handler; set by the thread's starter only.
 */
#include "wake.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int fds[2] = {-1, -1};
static pid_t owner; /* the process whose thread runs; 0 none */

int wake_open(void)
{
    wake_close(); /* the parent's pipe, inherited by fork */
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    fds[0] = p[0];
    __atomic_store_n(&fds[1], p[1], __ATOMIC_RELEASE);
    return 0;
}

void wake_close(void)
{
    int w = __atomic_exchange_n(&fds[1], -1, __ATOMIC_ACQ_REL);
    if (w >= 0)
        close(w);
    if (fds[0] >= 0)
        close(fds[0]);
    fds[0] = -1;
}

int wake_fd(void)
{
    return fds[0];
}

void wake_drain(void)
{
    char b[64];
    while (fds[0] >= 0 && read(fds[0], b, sizeof b) > 0)
        ;
}

void wake_arm(void)
{
    __atomic_store_n(&owner, getpid(), __ATOMIC_RELEASE);
}

void wake_disarm(void)
{
    __atomic_store_n(&owner, 0, __ATOMIC_RELEASE);
}

bool wake_armed(void)
{
    pid_t o = __atomic_load_n(&owner, __ATOMIC_ACQUIRE);
    return o != 0 && o == getpid();
}

void wake_post(void)
{
    int saved = errno;
    int fd = __atomic_load_n(&fds[1], __ATOMIC_ACQUIRE);
    if (fd >= 0) {
        ssize_t w = write(fd, "w", 1); /* a full pipe is already a wake-up */
        (void)w;
    }
    errno = saved;
}
