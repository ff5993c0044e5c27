/* rt_hostfds.c - a host that reuses low descriptor numbers after its first
 * CUDA call, to show the library never writes into the host's files.
 *
 *   rt_hostfds dup2 LOG      after the first cudaMalloc, dup2()s LOG onto
 *                            fds 3-9 and writes a line through each; then
 *                            asks for a dump, waits for stream checkpoints,
 *                            raises SIGUSR1, writes again and exits
 *   rt_hostfds reopen DIR    closes every fd above 2, opens DIR/f0..f7,
 *                            writes a line to each, lets the library work
 *                            (dump, stream, SIGUSR1), writes again, exits
 *   rt_hostfds count         prints how many descriptors the host can still
 *                            open after its first CUDA call (ulimit -n)
 *
 * cumemtrace_dump is looked up with dlsym(RTLD_DEFAULT), so the program runs
 * bare too and the tests compare the two runs.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

static void say(int fd, const char *what, int n)
{
    char b[64];
    int k = snprintf(b, sizeof b, "host %s %d\n", what, n);
    if (write(fd, b, (size_t)k) != k) {
        perror("write");
        exit(1);
    }
}

/* Lets the library's thread run: the stream flushes every
 * CUMEMTRACE_FLUSH_MS, and SIGUSR1 (CUMEMTRACE_SIGNAL) asks it for a dump. */
static void let_the_library_work(void *more)
{
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_dump");
    if (dump != NULL)
        dump(NULL);
    struct timespec t = {0, 150 * 1000000};
    nanosleep(&t, NULL);
    cudaFree(more);
    raise(SIGUSR1);
    nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (getenv("CUMEMTRACE_SIGNAL") == NULL)
        signal(SIGUSR1, SIG_IGN); /* bare: nothing handles it */
    void *p = NULL, *q = NULL;
    CHECK(cudaMalloc(&p, 4 * MiB), cudaSuccess);
    if (strcmp(argv[1], "count") == 0) {
        int n = 0;
        while (open("/dev/null", O_RDONLY) >= 0)
            n++;
        printf("%d\n", n);
        return 0;
    }
    if (argc < 3)
        return 2;
    int fds[8], nfd = 0;
    if (strcmp(argv[1], "dup2") == 0) {
        int log = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
        if (log < 0)
            return 1;
        for (int fd = 3; fd <= 9; fd++)
            if (fd != log && dup2(log, fd) == fd)
                fds[nfd++] = fd;
    } else if (strcmp(argv[1], "reopen") == 0) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        for (int i = 0; i < 8; i++) {
            char name[4200];
            snprintf(name, sizeof name, "%s/f%d", argv[2], i);
            fds[nfd++] = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fds[nfd - 1] < 0)
                return 1;
        }
    } else {
        return 2;
    }
    for (int i = 0; i < nfd; i++)
        say(fds[i], "before", fds[i]);
    CHECK(cudaMalloc(&q, 2 * MiB), cudaSuccess);
    let_the_library_work(q);
    for (int i = 0; i < nfd; i++)
        say(fds[i], "after", fds[i]);
    CHECK(cudaMalloc(&q, 1 * MiB), cudaSuccess);
    return 0;
}
