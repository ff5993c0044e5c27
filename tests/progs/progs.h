/* progs.h - what the test programs share. */
#ifndef CUMEMTRACE_PROGS_H
#define CUMEMTRACE_PROGS_H

#include <stdio.h>
#include <stdlib.h>

#include "cuda_api.h"

#define MiB (1024ull * 1024)
#define PFN(sym) __typeof__(&sym)

/* Exits 1, naming the call, when a CUDA call does not return `want`. */
#define CHECK(call, want)                                                   \
    do {                                                                    \
        int got_ = (int)(call);                                             \
        if (got_ != (int)(want)) {                                          \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n",         \
                    __FILE__, __LINE__, #call, got_, (int)(want));          \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

#endif
