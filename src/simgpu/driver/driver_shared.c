/* driver_shared.c - SIMCUDA_SHARED=<file>: processes that name the same
 * file share each simulated device's memory, as processes share a GPU.
 *
 * The file holds one slot per (process, device): the pages that process
 * holds on that device (its placements and its SIMCUDA_RESERVED context).
 * Whenever a process takes the driver lock it also takes a POSIX record
 * lock on the whole file (per process, so not inherited by fork; threads
 * are already serialised by the driver lock) and marks the pages the other
 * live processes hold as VS_RESERVED in its own page map; when it lets go,
 * it writes its own count back.  So cuMemGetInfo's free memory and every
 * placement's success reflect the other processes' usage exactly, and two
 * processes can never both take the last pages.  Where another process's
 * pages lie is not modelled (only how many): other processes cannot
 * fragment this one's address space, which a real GPU's virtual memory
 * does not let them do either.
 *
 * A slot whose process is gone (kill(pid, 0) fails with ESRCH) counts as
 * free: a process that died holding memory gives it back, as on a GPU.
 * A forked child starts with its parent's page map, so with SIMCUDA_SHARED
 * it would count its parent's pages twice: tests of sharing start separate
 * processes.  Unset, none of this runs.  A file that cannot be opened or locked is
 * reported once and sharing is off.
 */
#include "driver_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define SPEAKER "simcuda"
/* 16 devices x 64 processes: more than any test starts at once. */
#define SHARED_SLOTS 1024

struct shared_slot {
    int32_t pid;    /* 0: free */
    int32_t device;
    uint64_t pages; /* held by that process on that device */
};

static int fd = -1;
static struct shared_slot slots[SHARED_SLOTS];
static uint64_t others_pages[SIM_MAX_DEVICES]; /* reserved on others' behalf */
static uint64_t published[SIM_MAX_DEVICES];    /* our count in the file */
static int have_published[SIM_MAX_DEVICES];

void driver_shared_configure(void)
{
    const char *path = sim_common_getenv("SIMCUDA_SHARED");
    if (path == NULL || path[0] == '\0')
        return;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        sim_common_say(SPEAKER, "ignoring SIMCUDA_SHARED='%s': cannot open it (%s); "
                                "this process does not share device memory",
                       path, strerror(errno));
}

static int file_lock(short type)
{
    struct flock l = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    while (fcntl(fd, F_SETLKW, &l) != 0) {
        if (errno == EINTR)
            continue;
        sim_common_say(SPEAKER, "SIMCUDA_SHARED: cannot lock the shared file (%s); "
                                "sharing device memory is off", strerror(errno));
        close(fd);
        fd = -1;
        return -1;
    }
    return 0;
}

static int alive(int32_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* The file's slots into `slots`; a short file reads as free slots. */
static void read_slots(void)
{
    memset(slots, 0, sizeof slots);
    ssize_t got = pread(fd, slots, sizeof slots, 0);
    (void)got;
}

void driver_shared_enter(void)
{
    if (fd < 0 || file_lock(F_WRLCK) != 0)
        return;
    read_slots();
    uint64_t want[SIM_MAX_DEVICES] = {0};
    int32_t self = (int32_t)getpid();
    for (int i = 0; i < SHARED_SLOTS; i++) {
        const struct shared_slot *s = &slots[i];
        if (s->pid != self && s->device >= 0 && s->device < driver.ndevices && alive(s->pid))
            want[s->device] += s->pages;
    }
    for (int d = 0; d < driver.ndevices; d++) {
        struct driver_vaspace_pages *p = &driver.dev[d].pages;
        if (p->npages == 0)
            continue; /* not initialised yet: nothing to place against */
        if (want[d] > others_pages[d])
            others_pages[d] += driver_vaspace_reserve_top(p, want[d] - others_pages[d]);
        else if (want[d] < others_pages[d])
            others_pages[d] -= driver_vaspace_unreserve_top(p, others_pages[d] - want[d]);
    }
}

/* Our slot for device d: the one we had, else a free or dead one. */
static struct shared_slot *own_slot(int d, int32_t self)
{
    struct shared_slot *spare = NULL;
    for (int i = 0; i < SHARED_SLOTS; i++) {
        struct shared_slot *s = &slots[i];
        if (s->pid == self && s->device == d)
            return s;
        if (spare == NULL && (s->pid == 0 || !alive(s->pid)))
            spare = s;
    }
    return spare;
}

void driver_shared_leave(void)
{
    if (fd < 0)
        return;
    int32_t self = (int32_t)getpid();
    for (int d = 0; d < driver.ndevices; d++) {
        const struct driver_vaspace_pages *p = &driver.dev[d].pages;
        if (p->npages == 0)
            continue;
        uint64_t mine = p->npages - p->nfree - others_pages[d];
        if (have_published[d] && mine == published[d])
            continue;
        struct shared_slot *s = own_slot(d, self);
        if (s == NULL)
            continue; /* full: this process's usage stays invisible */
        s->pid = self;
        s->device = d;
        s->pages = mine;
        if (pwrite(fd, s, sizeof *s, (off_t)((char *)s - (char *)slots)) == sizeof *s) {
            published[d] = mine;
            have_published[d] = 1;
        }
    }
    file_lock(F_UNLCK);
}

uint64_t driver_shared_others_pages(int device)
{
    return device >= 0 && device < SIM_MAX_DEVICES ? others_pages[device] : 0;
}
