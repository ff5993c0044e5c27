/* wake.c - what the library's thread sleeps on.
 *
 * A signal handler wakes the thread with one sem_post(3), which is
 * async-signal-safe; the thread takes every post and looks at what is
 * pending.  A semaphore, not a pipe: the library keeps no descriptor of
 * its own, so a host that closes every fd, dup2()s onto low numbers or
 * counts what `ulimit -n` leaves it sees what it sees untraced (a pipe kept
 * fds 3 and 4, and a host's file that took their number got the wake byte).
 * The owner pid makes a fork child, which inherits the semaphore but not
 * the thread, see no thread until it starts its own.
 * Threads: the owner is read with atomic loads from any thread or handler;
 * set by the thread's starter only.
 */
#include "wake.h"

#include <errno.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>

static sem_t sem;
static pid_t owner; /* the process whose thread runs; 0 none */

void wake_open(void)
{
    sem_init(&sem, 0, 0); /* a fork child's copy is started afresh */
}

void wake_wait(int timeout_ms)
{
    int rc;
    if (timeout_ms < 0) {
        do
            rc = sem_wait(&sem);
        while (rc != 0 && errno == EINTR);
    } else {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        do
            rc = sem_clockwait(&sem, CLOCK_MONOTONIC, &until);
        while (rc != 0 && errno == EINTR);
    }
    while (sem_trywait(&sem) == 0)
        ; /* posts that came meanwhile ask for the same look */
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
    if (__atomic_load_n(&owner, __ATOMIC_ACQUIRE) != 0)
        sem_post(&sem); /* EOVERFLOW: already a wake-up */
    errno = saved;
}
