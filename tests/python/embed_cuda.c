/* embed_cuda.c - an application that loads libpython (RTLD_GLOBAL, as an
 * embedder does) and allocates device memory while no interpreter runs,
 * for tests/e2e/test_python.py: cumemtrace finds CPython at the first
 * allocation and would ask it to load the PyTorch layer
 * (Py_AddPendingCall), which CPython can only take while an interpreter
 * exists - before Py_Initialize and after Py_FinalizeEx it reads a NULL
 * interpreter.
 *
 *   embed_cuda LIBPYTHON never       allocates, Python never initialised
 *   embed_cuda LIBPYTHON finalised   initialises, finalises, then allocates
 * (built by the test with cc; not installed) */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int allocate(void)
{
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    int (*malloc_)(void **, size_t), (*free_)(void *);
    *(void **)&malloc_ = rt ? dlsym(rt, "cudaMalloc") : NULL;
    *(void **)&free_ = rt ? dlsym(rt, "cudaFree") : NULL;
    if (malloc_ == NULL || free_ == NULL) {
        fprintf(stderr, "embed_cuda: no CUDA runtime: %s\n", dlerror());
        return 1;
    }
    for (int i = 0; i < 8; i++) {
        void *p = NULL;
        if (malloc_(&p, (size_t)(i + 1) << 20) != 0 || free_(p) != 0) {
            fprintf(stderr, "embed_cuda: allocation %d failed\n", i);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "never") != 0 && strcmp(argv[2], "finalised") != 0)) {
        fprintf(stderr, "usage: embed_cuda LIBPYTHON never|finalised\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        fprintf(stderr, "embed_cuda: cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    void (*initialize)(void);
    int (*finalize)(void);
    *(void **)&initialize = dlsym(h, "Py_Initialize");
    *(void **)&finalize = dlsym(h, "Py_FinalizeEx");
    if (initialize == NULL || finalize == NULL) {
        fprintf(stderr, "embed_cuda: %s lacks the embedding API\n", argv[1]);
        return 1;
    }
    if (strcmp(argv[2], "finalised") == 0) {
        initialize();
        if (finalize() != 0)
            return 1;
    }
    int rc = allocate();
    if (rc == 0)
        printf("allocated\n");
    return rc;
}
