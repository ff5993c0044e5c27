/* rt_manysyms.c - 64 allocations, each from its own call site in
 * libmanysyms.so (10,000 exported functions), held to the exit snapshot:
 * what the dump's symbol look-ups cost (tests/e2e/test_dump_cost.py).
 *
 *   rt_manysyms [heap]   heap: before exiting, leave the heap as a large
 *       host (PyTorch) does - a block above malloc's mmap threshold freed
 *       (which raises the threshold) and one as large allocated and freed
 *       again from the heap, so the dump's large callocs come back dirty
 *       and are cleared byte by byte. */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progs.h"

typedef int (*alloc_fn)(void **, size_t);

int main(int argc, char **argv)
{
    char self[PATH_MAX], lib[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 2;
    self[n] = '\0';
    snprintf(lib, sizeof lib, "%s/libmanysyms.so", dirname(self));
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    int (*run)(int, alloc_fn, void **, size_t) =
        h ? (int (*)(int, alloc_fn, void **, size_t))dlsym(h, "manysyms_alloc") : NULL;
    if (run == NULL) {
        fprintf(stderr, "rt_manysyms: %s\n", dlerror());
        return 2;
    }
    for (int i = 0; i < 64; i++) {
        void *p;
        if (run(i, (alloc_fn)cudaMalloc, &p, 1 << 20) != 0)
            return 1;
    }
    if (argc > 1 && strcmp(argv[1], "heap") == 0) {
        for (int i = 0; i < 2; i++) {
            char *big = malloc(16u << 20);
            if (big == NULL)
                return 2;
            memset(big, 1, 16u << 20);
            free(big);
        }
    }
    return 0;
}
