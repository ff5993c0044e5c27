/* embed.c - an application that embeds CPython by dlopen()ing libpython
 * after it started, for tests/e2e/test_python.py: cumemtrace's look at load
 * time finds no Python, its look at the first allocation must.
 *
 *   embed LIBPYTHON CODE     (built by the test with cc; not installed) */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: embed LIBPYTHON CODE\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        fprintf(stderr, "embed: cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    void (*initialize)(void);
    int (*run)(const char *);
    int (*finalize)(void);
    *(void **)&initialize = dlsym(h, "Py_Initialize");
    *(void **)&run = dlsym(h, "PyRun_SimpleString");
    *(void **)&finalize = dlsym(h, "Py_FinalizeEx");
    if (initialize == NULL || run == NULL || finalize == NULL) {
        fprintf(stderr, "embed: %s lacks the embedding API\n", argv[1]);
        return 1;
    }
    initialize();
    int rc = run(argv[2]);
    return finalize() == 0 && rc == 0 ? 0 : 1;
}
