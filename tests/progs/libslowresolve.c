/* libslowresolve.c - a cudaFreeHost whose first look-up holds the dynamic
 * loader's lock for a while, for test_ending.py.
 *
 * Preloaded after libcumemtrace.so, it is what our wrapper's first call
 * finds with dlsym(RTLD_NEXT).  The symbol is an IFUNC: glibc runs its
 * resolver inside dlsym, with the loader's lock held, as every look-up
 * holds it for a moment.  The resolver says "resolving" on stdout and
 * sleeps RESOLVE_MS, so a signal sent then lands in a thread that holds the
 * lock a dump needs (dladdr takes it) while it is in no wrapper's
 * bookkeeping.  The function it resolves to accepts only NULL, as
 * cudaFreeHost does, and succeeds. */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#define RESOLVE_MS 1500

static int free_host(void *p)
{
    return p == NULL ? 0 : 1; /* cudaSuccess, cudaErrorInvalidValue */
}

typedef int free_host_fn(void *);

static free_host_fn *resolve_free_host(void)
{
    ssize_t w = write(1, "resolving\n", 10);
    (void)w;
    struct timespec left = {RESOLVE_MS / 1000, RESOLVE_MS % 1000 * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ; /* a signal handler that returns: sleep the rest */
    return free_host;
}

int cudaFreeHost(void *p) __attribute__((ifunc("resolve_free_host")));
