/* rt_manysyms.c - 64 allocations, each from its own call site in
 * libmanysyms.so (10,000 exported functions), held to the exit snapshot:
 * what the dump's symbol look-ups cost (tests/e2e/test_dump_cost.py). */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "progs.h"

typedef int (*alloc_fn)(void **, size_t);

int main(void)
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
    return 0;
}
