/* python_nogil.c - Python frames of a thread that does not hold the GIL.
 *
 * PyTorch releases the GIL around every tensor operation, so its
 * allocations rarely see a thread that holds it.  The thread's own frames
 * are still there and cannot change while it runs our code: only this
 * thread pushes and pops them, and they keep their code objects alive.
 * Once the interpreter's structs are proven to be where its headers put
 * them (python_walk.c), they are read directly, as with the GIL, and a
 * code object first seen here is named from its own str objects: the
 * whole capture costs what it costs with the GIL.
 *
 * Until then - and for good where no layout is known (before 3.11, after
 * 3.13) or the proof failed - they come from CPython's own fault handler:
 * _Py_DumpTraceback(fd, tstate) writes `  File "f", line N in name` per
 * frame, innermost first, reading the frames without allocating or locking
 * (documented as signal-safe, used by faulthandler on threads that do not
 * hold the GIL).  We hand it a private memfd, read the text back and
 * intern the frames by their strings.  It names functions by co_name (not
 * co_qualname), escapes non-ASCII as \xNN and writes character by
 * character: slow, but safe without the GIL.  While the layout is unproven, the same
 * stack is also walked with reads that cannot fault and compared with that
 * text (files, lines, names); agreeing stacks prove the layout and are
 * interned from the walk, so a call site keeps one name before and after.
 * The fd's identity is checked before each use, so a host that closed it
 * and reused the number is never written to.
 *
 * Locks: dump_lock, then python_walk.c's probe lock, then py_lock. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "own_fd.h"
#include "python_impl.h"
#include "record.h"

/* The no-GIL path's memfd and buffer (see py_nogil_frames). */
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static struct own_fd dump_fd = {-1, 0, 0};
static char dump_buf[1 << 16]; /* under dump_lock */

/* Our memfd, still ours; -1 when it cannot be had.  Caller holds dump_lock. */
static int dump_file(void)
{
    /* closed by the host, maybe reused: not ours any more (own_fd.c) */
    if (own_fd_check(&dump_fd) < 0)
        own_fd_take(&dump_fd, memfd_create("cumemtrace-pyframes", MFD_CLOEXEC));
    return dump_fd.fd;
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

/* One frame of the dumper's text: pointers into dump_buf. */
struct dumped {
    const char *file, *fn;
    size_t flen, fnlen;
    int line;
};

/* The dumper's frames of thread state ts, up to max, into d; *more when it
 * wrote more (or its own "..." limit).  Caller holds dump_lock. */
static unsigned dump_frames(void *ts, struct dumped *d, unsigned max, bool *more)
{
    unsigned m = 0;
    int fd = dump_file();
    ssize_t got = -1;
    if (fd >= 0 && lseek(fd, 0, SEEK_SET) == 0) {
        pyapi.dump_traceback(fd, ts);
        off_t end = lseek(fd, 0, SEEK_CUR);
        if (end > 0)
            got = pread(fd, dump_buf,
                        (size_t)end < sizeof dump_buf ? (size_t)end : sizeof dump_buf, 0);
    }
    const char *p = dump_buf, *stop = dump_buf + (got > 0 ? got : 0);
    while (p < stop) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        const char *eol = nl ? nl : stop;
        struct dumped f;
        if (nl != NULL && parse_frame_line(p, eol, &f.file, &f.flen, &f.line, &f.fn,
                                           &f.fnlen)) {
            if (m == max) {
                *more = true;
                break;
            }
            d[m++] = f;
        } else if (nl != NULL && m > 0 && eol - p >= 5 && memcmp(p, "  ...", 5) == 0) {
            *more = true; /* the dumper's own depth limit */
        }
        p = eol + 1;
    }
    return m;
}

/* 1 when our name `ours` is what the dumper wrote as t[0..tlen), 0 when
 * not, -1 when it cannot tell: the dumper escapes all but printable ASCII
 * and cuts strings past 500 characters (traceback.c, MAX_STRING_LENGTH). */
static int same_text(const char *ours, const char *t, size_t tlen)
{
    if (ours == NULL)
        return -1;
    size_t n = 0;
    for (; ours[n] != '\0'; n++)
        if ((unsigned char)ours[n] < ' ' || (unsigned char)ours[n] > '~' || n >= 500)
            return -1;
    return n == tlen && memcmp(ours, t, n) == 0;
}

/* 1 when the walk's raw[0..n) (*more) is the dumper's d[0..nd) (dmore):
 * same length, lines and (where comparable) files and names; 0 when not.
 * Caller holds the probe lock. */
static int same_frames(const struct raw_frame *raw, unsigned n, bool more,
                       const struct dumped *d, unsigned nd, bool dmore)
{
    if (!(n == nd ? more == dmore : n < nd ? more : dmore))
        return 0;
    unsigned k = n < nd ? n : nd;
    for (unsigned i = 0; i < k; i++) {
        /* a code object (its type was checked): its line table only */
        if (pyapi.addr2line(raw[i].code, raw[i].line_or_lasti) != d[i].line)
            return 0;
        char *file = py_read_str(py_code_field(raw[i].code, CODE_FILE, true), true);
        char *fn = py_read_str(py_code_field(raw[i].code, CODE_NAME, true), true);
        int a = same_text(file, d[i].file, d[i].flen), b = same_text(fn, d[i].fn, d[i].fnlen);
        free(file);
        free(fn);
        if (a == 0 || b == 0)
            return 0;
    }
    return 1;
}

/* Before the layout is proven: frames from the dumper, checked against a
 * walk that cannot fault; see the top.  Returns the count, 0 for none. */
static unsigned dumped_frames(void *ts, void **py, unsigned max, bool *more)
{
    static struct dumped d[RECORD_MAX_DEPTH]; /* under dump_lock: off the stack */
    struct raw_frame raw[RECORD_MAX_DEPTH];
    bool dmore = false;
    unsigned nd = dump_frames(ts, d, max, &dmore);
    if (py_walk_unproven() && py_probe_lock()) {
        bool wmore = false;
        unsigned skipped = 0;
        int n = py_walk_safe(ts, raw, max, &wmore, &skipped);
        /* an incomplete frame is shown by the dumper only: cannot tell */
        int same = n < 0 ? 0 : skipped ? -1 : same_frames(raw, (unsigned)n, wmore, d, nd, dmore);
        if (same == 1)
            py_index_frames(raw, (unsigned)n, py, PY_NOGIL_SAFE);
        if (same >= 0)
            py_walk_judged(same == 1, n >= 2);
        py_probe_unlock();
        if (same == 1) {
            *more = wmore;
            return (unsigned)n;
        }
    }
    pthread_mutex_lock(&py_lock);
    for (unsigned i = 0; i < nd; i++)
        py[i] = py_tag(py_names_frame_intern(d[i].file, d[i].flen, d[i].line, d[i].fn,
                                             d[i].fnlen));
    pthread_mutex_unlock(&py_lock);
    *more = dmore;
    return nd;
}

unsigned py_nogil_frames(void *ts, void **py, unsigned max, bool *more)
{
    *more = false;
    if (max > RECORD_MAX_DEPTH)
        max = RECORD_MAX_DEPTH;
    if (py_walk_proven()) {
        struct raw_frame raw[RECORD_MAX_DEPTH];
        int n = py_walk_direct(ts, raw, max, more);
        if (n >= 0) {
            py_index_frames(raw, (unsigned)n, py, PY_NOGIL);
            return (unsigned)n;
        }
        *more = false; /* a frame not as expected: the dumper's text */
    }
    if (pyapi.dump_traceback == NULL)
        return 0;
    int saved = errno;
    pthread_mutex_lock(&dump_lock);
    unsigned m = dumped_frames(ts, py, max, more);
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
    own_fd_close(&dump_fd);
    py_nogil_fork_release();
}
