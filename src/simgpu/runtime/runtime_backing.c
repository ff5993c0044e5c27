/* runtime_backing.c - what copies and memsets wrote into simulated device
 * memory, kept in host memory so that it reads back: `.item()` of a tensor a
 * copy filled, a shape or a flag sent to the device and read again.
 *
 * Kernels compute nothing, so memory only a kernel wrote reads as zeros; the
 * first read of device memory that no copy or memset wrote says so once on
 * stderr (data-dependent code then sees zeros: docs/simgpu.md), and, when
 * SIMCUDA_NOTES names a file, appends one line to it ("uncomputed_read
 * BYTES"): how `cumemtrace fit` learns that a run's control flow may have
 * read values the card never computed.
 *
 * Bounded: a write of more than BACKING_MAX_WRITE bytes is not kept (it only
 * forgets what it overwrites: large tensors are activations and weights,
 * whose values nothing here needs), and when the kept bytes would pass
 * SIMCUDA_BACKING (default 64 MiB) the oldest extents go first.
 *
 * Workload: a few small extents (scalars, shapes, masks); a linear scan is
 * enough.  Threads: one mutex guards the extents.
 * Limitations: memory freed and allocated again keeps what was written (as
 * on a GPU, where new memory holds whatever was there); a kernel's output
 * over copied data reads back the copied data.
 */
#include "runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "sim_common.h"

#define BACKING_MAX_WRITE (UINT64_C(1) << 20) /* 1 MiB: scalars, shapes, small tensors */
#define BACKING_DEFAULT (UINT64_C(64) << 20)

struct extent {
    uint64_t addr;
    uint64_t len;
    unsigned char *data;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct extent *ext;     /* oldest first */
static size_t next, cap;
static uint64_t kept, budget = UINT64_MAX;
static atomic_int warned;

static void drop(size_t i)
{
    kept -= ext[i].len;
    free(ext[i].data);
    memmove(&ext[i], &ext[i + 1], (next - i - 1) * sizeof *ext);
    next--;
}

/* One line in SIMCUDA_NOTES, if set: one write(2) on an O_APPEND file, so
 * the processes of one run sharing it never interleave within a line. */
static void note_uncomputed(uint64_t bytes)
{
    const char *path = sim_common_getenv("SIMCUDA_NOTES");
    if (path == NULL || path[0] == '\0')
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return;
    char line[64];
    int n = snprintf(line, sizeof line, "uncomputed_read %llu\n", (unsigned long long)bytes);
    if (write(fd, line, (size_t)n) != n) {
        /* the note is lost: fit then says nothing of data-dependent reads */
    }
    close(fd);
}

/* Appends [addr, addr+len) holding data (copied); 0, or -1 out of memory. */
static int append(uint64_t addr, const unsigned char *data, uint64_t len)
{
    if (sim_common_grow(&ext, next, &cap, sizeof *ext, 64) != 0)
        return -1;
    unsigned char *copy = malloc(len);
    if (copy == NULL)
        return -1;
    memcpy(copy, data, len);
    ext[next++] = (struct extent){addr, len, copy};
    kept += len;
    return 0;
}

/* Forgets [addr, addr+len), keeping the parts of extents outside it. */
static void forget(uint64_t addr, uint64_t len)
{
    uint64_t end = addr + len;
    for (size_t i = 0; i < next;) {
        struct extent e = ext[i];
        uint64_t eend = e.addr + e.len;
        if (eend <= addr || e.addr >= end) {
            i++;
            continue;
        }
        ext[i].data = NULL; /* drop frees nothing: the pieces are copied first */
        if (e.addr < addr)
            append(e.addr, e.data, addr - e.addr);
        if (eend > end)
            append(end, e.data + (end - e.addr), eend - end);
        free(e.data);
        drop(i);
    }
}

static void configure(void)
{
    if (budget == UINT64_MAX)
        budget = sim_common_env_size("simcuda", "SIMCUDA_BACKING", BACKING_DEFAULT, 0,
                                     UINT64_C(1) << 40);
}

/* data NULL: a memset of `value`. */
static void store(uint64_t addr, const void *data, int value, uint64_t len)
{
    pthread_mutex_lock(&lock);
    configure();
    forget(addr, len);
    if (len <= BACKING_MAX_WRITE && len <= budget) {
        while (kept + len > budget && next > 0)
            drop(0);
        unsigned char small[4096];
        unsigned char *buf = data != NULL ? (unsigned char *)data
                             : len <= sizeof small ? small : malloc(len);
        if (buf != NULL) {
            if (data == NULL)
                memset(buf, value, len);
            append(addr, buf, len);
            if (data == NULL && buf != small)
                free(buf);
        }
    }
    pthread_mutex_unlock(&lock);
}

void runtime_backing_write(uint64_t addr, const void *src, uint64_t len)
{
    store(addr, src, 0, len);
}

void runtime_backing_fill(uint64_t addr, int value, uint64_t len)
{
    store(addr, NULL, value, len);
}

/* Copies what is kept of [addr, addr+len) into dst (zeros elsewhere);
 * returns the bytes no extent covered. */
static uint64_t gather(unsigned char *dst, uint64_t addr, uint64_t len)
{
    uint64_t covered = 0, end = addr + len;
    memset(dst, 0, len);
    for (size_t i = 0; i < next; i++) {
        uint64_t lo = ext[i].addr > addr ? ext[i].addr : addr;
        uint64_t hi = ext[i].addr + ext[i].len < end ? ext[i].addr + ext[i].len : end;
        if (lo < hi) {
            memcpy(dst + (lo - addr), ext[i].data + (lo - ext[i].addr), hi - lo);
            covered += hi - lo; /* extents never overlap */
        }
    }
    return len - covered;
}

void runtime_backing_read(void *dst, uint64_t addr, uint64_t len)
{
    pthread_mutex_lock(&lock);
    uint64_t missing = gather(dst, addr, len);
    pthread_mutex_unlock(&lock);
    if (missing != 0 && atomic_exchange(&warned, 1) == 0) {
        sim_common_say("simcuda", "note: a copy read %llu bytes of device memory at 0x%llx "
                       "that no copy or memset wrote: kernels compute nothing on the "
                       "simulated GPU, so they read as zeros (docs/simgpu.md, fidelity "
                       "limits; said once)",
                       (unsigned long long)missing, (unsigned long long)addr);
        note_uncomputed(missing);
    }
}

void runtime_backing_copy(uint64_t dst, uint64_t src, uint64_t len)
{
    if (len > BACKING_MAX_WRITE) {
        pthread_mutex_lock(&lock);
        forget(dst, len);
        pthread_mutex_unlock(&lock);
        return;
    }
    unsigned char *buf = malloc(len ? len : 1);
    pthread_mutex_lock(&lock);
    uint64_t missing = buf != NULL ? gather(buf, src, len) : len;
    pthread_mutex_unlock(&lock);
    if (missing == 0)
        store(dst, buf, 0, len);
    else { /* what a kernel would have put there is unknown: not kept */
        pthread_mutex_lock(&lock);
        forget(dst, len);
        pthread_mutex_unlock(&lock);
    }
    free(buf);
}
