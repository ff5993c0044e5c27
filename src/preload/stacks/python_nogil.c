/* python_nogil.c - Python frames of a thread that does not hold the GIL.
 *
 * PyTorch releases the GIL around every tensor operation, so its
 * allocations never see a thread that holds it.  The thread's own frames
 * are still there and cannot change while it runs our code: only this
 * thread pushes and pops them, and they keep their code objects alive.
 * The public API cannot read them without the GIL (it creates frame
 * objects), but CPython's own fault handler can: _Py_DumpTraceback(fd,
 * tstate) writes "  File "f", line N in name" per frame, innermost first,
 * reading the frames without allocating or locking (documented as
 * signal-safe, used by faulthandler on threads that do not hold the GIL).
 * We hand it a private memfd, read the text back and intern the frames by
 * their strings.  It names functions by co_name (not co_qualname) and
 * escapes non-ASCII as \xNN; it writes character by character, so the cost
 * is a few µs per frame - paid only by allocations made without the GIL,
 * which in PyTorch are the caching allocator's cudaMalloc cache misses
 * (20-100 µs each on a real GPU).  CUMEMTRACE_PYTHON=0 turns Python frames
 * off altogether.  The fd's identity is checked before each use, so a host
 * that closed it and reused the number is never written to. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "python_impl.h"

/* The no-GIL path's memfd and buffer (see py_nogil_frames). */
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static int dump_fd = -1;
static dev_t dump_dev;
static ino_t dump_ino;
static char dump_buf[1 << 16]; /* under dump_lock */
static int64_t dump_spent_ns;  /* time spent reading without the GIL */

/* The no-GIL reader may take this share of the process's run time (plus a
 * grace for the first captures): beyond it, stacks get MARK_BUDGET. */
#define NOGIL_BUDGET_PERCENT 2
#define NOGIL_GRACE_NS 50000000

/* Our memfd, still ours; -1 when it cannot be had.  Caller holds dump_lock. */
static int dump_file(void)
{
    struct stat st;
    if (dump_fd >= 0 &&
        (fstat(dump_fd, &st) != 0 || st.st_dev != dump_dev || st.st_ino != dump_ino))
        dump_fd = -1; /* closed by the host, maybe reused: not ours any more */
    if (dump_fd < 0) {
        int fd = memfd_create("cumemtrace-pyframes", MFD_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0) {
            if (fd >= 0)
                close(fd);
            return -1;
        }
        dump_fd = fd;
        dump_dev = st.st_dev;
        dump_ino = st.st_ino;
    }
    return dump_fd;
}

/* Parses one `  File "F", line N in NAME` line; false for anything else. */
static bool parse_frame_line(const char *p, const char *end, const char **file,
                             size_t *flen, int *line, const char **fn, size_t *fnlen)
{
    static const char pre[] = "  File \"";
    if ((size_t)(end - p) < sizeof pre - 1 || memcmp(p, pre, sizeof pre - 1) != 0)
        return false;
    p += sizeof pre - 1;
    const char *q = memmem(p, (size_t)(end - p), "\", line ", 8);
    if (q == NULL)
        return false;
    *file = p;
    *flen = (size_t)(q - p);
    p = q + 8;
    int n = 0;
    while (p < end && *p >= '0' && *p <= '9' && n < 100000000)
        n = n * 10 + (*p++ - '0');
    if ((size_t)(end - p) < 4 || memcmp(p, " in ", 4) != 0)
        return false;
    *line = n;
    *fn = p + 4;
    *fnlen = (size_t)(end - (p + 4));
    return true;
}

/* Up to max tagged frames of thread state ts, read through the fault
 * handler's dumper; 0 when it cannot (the caller then uses the marker). */
unsigned py_nogil_frames(void *ts, void **py, unsigned max, bool *more)
{
    unsigned m = 0;
    *more = false;
    int saved = errno;
    pthread_mutex_lock(&dump_lock);
    int64_t t0 = clock_now_ns();
    if (dump_spent_ns > NOGIL_GRACE_NS + t0 / (100 / NOGIL_BUDGET_PERCENT)) {
        pthread_mutex_unlock(&dump_lock);
        py[0] = py_tag(MARK_BUDGET);
        return 1;
    }
    int fd = dump_file();
    ssize_t got = -1;
    if (fd >= 0 && lseek(fd, 0, SEEK_SET) == 0) {
        pyapi.dump_traceback(fd, ts);
        off_t end = lseek(fd, 0, SEEK_CUR);
        if (end > 0)
            got = pread(fd, dump_buf,
                        (size_t)end < sizeof dump_buf ? (size_t)end : sizeof dump_buf, 0);
    }
    if (got > 0) {
        pthread_mutex_lock(&py_lock);
        const char *p = dump_buf, *stop = dump_buf + got;
        while (p < stop) {
            const char *nl = memchr(p, '\n', (size_t)(stop - p));
            const char *eol = nl ? nl : stop;
            const char *file, *fn;
            size_t flen, fnlen;
            int line;
            if (nl != NULL && parse_frame_line(p, eol, &file, &flen, &line, &fn, &fnlen)) {
                if (m == max) {
                    *more = true;
                    break;
                }
                py[m++] = py_tag(py_names_frame_intern(file, flen, line, fn, fnlen));
            } else if (nl != NULL && m > 0 && eol - p >= 5 && memcmp(p, "  ...", 5) == 0) {
                *more = true; /* the dumper's own depth limit */
            }
            p = eol + 1;
        }
        pthread_mutex_unlock(&py_lock);
    }
    dump_spent_ns += clock_now_ns() - t0;
    pthread_mutex_unlock(&dump_lock);
    errno = saved;
    return m;
}

void py_nogil_fork_prepare(void)
{
    pthread_mutex_lock(&dump_lock);
}

void py_nogil_fork_release(void)
{
    pthread_mutex_unlock(&dump_lock);
}

/* The child shares the memfd's offset with its parent: it makes its own. */
void py_nogil_fork_child(void)
{
    if (dump_fd >= 0)
        close(dump_fd);
    dump_fd = -1;
    py_nogil_fork_release();
}
