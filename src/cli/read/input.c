/* input.c - see input.h.  A regular file is mapped rather than copied (a
 * large snapshot is hundreds of megabytes, and the readers pass over it
 * once, in order): private, with a zero page after it for the sentinel even
 * when the size is a multiple of the page; read into memory where it cannot
 * be mapped. */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int refuse(struct cli_error *err, const char *what, const char *path, unsigned mode)
{
    return errors_set(err, CLI_EIO, "cannot read %s '%s': not a regular file (%s)", what,
                      path, errors_file_kind(mode));
}

/* The message of a failed system call (errno e) on path. */
static int failed(struct cli_error *err, int e, const char *what, const char *path)
{
    return errors_set(err, e == ENOENT ? CLI_ENOENT : CLI_EIO, "cannot read %s '%s': %s",
                      what, path, strerror(e));
}

/* Reads exactly n bytes from fd into a new buffer with a '\0' after them. */
static int read_all(int fd, size_t n, struct input *in, const char *what,
                    const char *path, struct cli_error *err)
{
    char *b = malloc(n + 1);
    if (b == NULL)
        return errors_set(err, CLI_ENOMEM, "cannot read %s '%s': out of memory", what,
                          path);
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, b + got, n - got, (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(b);
            return failed(err, e, what, path);
        }
        if (k == 0)
            break; /* shrank while we read: what is there */
        got += (size_t)k;
    }
    b[got] = '\0';
    in->buf = b;
    in->len = got;
    in->maplen = 0;
    return 0;
}

int input_load(const char *path, const char *what, struct input *in,
               struct cli_error *err)
{
    memset(in, 0, sizeof *in);
    struct stat st;
    /* before open: opening a device or a FIFO may itself block or act */
    if (stat(path, &st) != 0)
        return failed(err, errno, what, path);
    if (S_ISDIR(st.st_mode))
        return failed(err, EISDIR, what, path);
    if (!S_ISREG(st.st_mode))
        return refuse(err, what, path, st.st_mode);
    /* O_NONBLOCK: a FIFO swapped in since the stat must not block the open */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return failed(err, errno, what, path);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(err, what, path, st.st_mode);
    }
    if ((uint64_t)st.st_size > SIZE_MAX / 2) {
        close(fd);
        return errors_set(err, CLI_ENOMEM, "cannot read %s '%s': out of memory", what,
                          path);
    }
    size_t n = (size_t)st.st_size;
    off_t hole = n > 0 ? lseek(fd, 0, SEEK_HOLE) : -1;
    if (hole >= 0 && (uint64_t)hole < n)
        n = (size_t)hole;
    long page = sysconf(_SC_PAGESIZE);
    if (n > 0 && page > 0) {
        size_t whole = (n / (size_t)page + 1) * (size_t)page; /* >= n + 1 */
        char *b = mmap(NULL, whole, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b != MAP_FAILED &&
            mmap(b, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) != MAP_FAILED) {
            close(fd);
            madvise(b, n, MADV_SEQUENTIAL);
            in->buf = b;
            in->len = n;
            in->maplen = whole;
            return 0;
        }
        if (b != MAP_FAILED)
            munmap(b, whole);
    }
    int rc = read_all(fd, n, in, what, path, err);
    close(fd);
    return rc;
}

void input_free(struct input *in)
{
    if (in->maplen > 0)
        munmap(in->buf, in->maplen);
    else
        free(in->buf);
    memset(in, 0, sizeof *in);
}
