/* libnext.c - a second preloaded library that wraps cudaMalloc the way
 * many tools do: dlsym(RTLD_NEXT, "cudaMalloc").  glibc answers RTLD_NEXT
 * relative to the *caller*; if cumemtrace's dlsym override made itself the
 * caller, this library would get its own cudaMalloc back (when loaded after
 * us) and recurse forever. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*malloc_fn)(void **, size_t);
static int calls;

int cudaMalloc(void **p, size_t n);
int cudaMalloc(void **p, size_t n)
{
    static malloc_fn next;
    if (next == NULL)
        next = (malloc_fn)dlsym(RTLD_NEXT, "cudaMalloc");
    if (next == NULL || next == cudaMalloc) {
        fprintf(stderr, "libnext: RTLD_NEXT resolved to %s\n",
                next ? "itself" : "nothing");
        abort();
    }
    calls++;
    return next(p, n);
}

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "libnext: %d cudaMalloc calls\n", calls);
}
