/* rt_phases.c - the phase API of include/cumemtrace.h (cumemtrace_phase_push
 * and _pop) from a CUDA program, resolved with dlsym(RTLD_DEFAULT) as a
 * framework layer would (tests/e2e/test_phases.py).
 *
 *   rt_phases     "torch" forward (2 MiB kept, 4 MiB freed: the peak is
 *                 8 MiB with "data" below), backward (1 MiB kept) with an
 *                 "app" phase opened inside forward and closed after it;
 *                 a pop of a source with nothing open.
 * Prints each call's result as "label: value". */
#include <dlfcn.h>
#include <stdio.h>

#include "progs.h"

static int (*push)(const char *, const char *);
static int (*pop)(const char *);

__attribute__((noinline)) static void *alloc_in(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

int main(void)
{
    push = (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "cumemtrace_phase_push");
    pop = (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_phase_pop");
    if (push == NULL || pop == NULL) {
        fprintf(stderr, "rt_phases: libcumemtrace.so not preloaded\n");
        return 3;
    }
    printf("pop nothing: %d\n", pop("torch"));
    printf("push data: %d\n", push("app", "data"));
    void *d = alloc_in(2 * MiB);                 /* app:data */
    printf("push forward: %d\n", push("torch", "forward"));
    void *f = alloc_in(2 * MiB);                 /* torch:data/forward */
    printf("push inner: %d\n", push("app", "inner"));
    void *t = alloc_in(4 * MiB);                 /* peak: 8 MiB */
    printf("pop inner: %d\n", pop("app"));       /* closes "inner", not "forward" */
    void *g = alloc_in(0);
    (void)g;
    CHECK(cudaFree(t), cudaSuccess);
    printf("pop forward: %d\n", pop("torch"));
    printf("push backward: %d\n", push("torch", "backward"));
    void *b = alloc_in(1 * MiB);
    printf("pop backward: %d\n", pop("torch"));
    printf("pop data: %d\n", pop("app"));
    printf("pop app again: %d\n", pop("app"));
    (void)d;
    (void)f;
    (void)b;
    return 0;
}
