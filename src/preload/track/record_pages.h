/* record_pages.h - the tracker's long-lived memory that grows while the
 * host runs (the address tables' slots, the entries' slabs) comes from pages
 * of its own, not from the host's malloc: a guest leaves the host's heap laid
 * out as it would be untraced, so the host's own malloc and free take the
 * paths they would take bare.  Anonymous pages start zeroed (calloc's
 * contract).  errno is the host's: kept across the calls. */
#ifndef CUMEMTRACE_RECORD_PAGES_H
#define CUMEMTRACE_RECORD_PAGES_H

#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>

/* `bytes` of zeroed memory, or NULL. */
static inline void *record_pages(size_t bytes)
{
    int saved = errno;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    return p == MAP_FAILED ? NULL : p;
}

/* Gives back what record_pages(bytes) returned; NULL is nothing. */
static inline void record_pages_free(void *p, size_t bytes)
{
    if (p == NULL)
        return;
    int saved = errno;
    munmap(p, bytes);
    errno = saved;
}

#endif
