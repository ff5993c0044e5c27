/* cxx_host.c - a C program that dlopens C++ code which throws (see
 * libthrow.cpp).  Prints the caught value. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    void *h = dlopen(argc > 1 ? argv[1] : "libthrow.so", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return fprintf(stderr, "%s\n", dlerror()), 1;
    int (*fn)(void);
    *(void **)&fn = dlsym(h, "throw_and_catch");
    if (fn == NULL)
        return 1;
    printf("%d\n", fn());
    return 0;
}
