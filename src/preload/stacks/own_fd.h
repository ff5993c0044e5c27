/* own_fd.h - descriptors the library keeps: placed high, recognised as
 * still ours before each use (own_fd.c). */
#ifndef CUMEMTRACE_OWN_FD_H
#define CUMEMTRACE_OWN_FD_H

#include <sys/types.h>

/* A kept descriptor and the file it was opened on. */
struct own_fd {
    int fd;    /* -1: none */
    dev_t dev; /* what fstat said when it was taken */
    ino_t ino;
};

/* Takes `fd` (just opened, close-on-exec) as `o`: moves it to a high
 * number where the open-file limit leaves room (the low one is closed) and
 * notes its identity.  Returns o->fd, or -1 (fd closed) when fstat fails. */
int own_fd_take(struct own_fd *o, int fd);
/* A short-lived descriptor just opened (close-on-exec), moved high where
 * the open-file limit leaves room (the low one closed): the number the host
 * may dup2() onto or reopen is ours only for the two calls between.
 * Returns the descriptor to use (fd itself when it stays), -1 for -1. */
int own_fd_high(int fd);
/* o->fd if it is still the file taken, else -1 with o->fd forgotten (the
 * host closed it, and the number may hold a file of the host's: never
 * touched, never closed). */
int own_fd_check(struct own_fd *o);
/* Closes o->fd if it is still ours; forgets it either way. */
void own_fd_close(struct own_fd *o);

#endif
