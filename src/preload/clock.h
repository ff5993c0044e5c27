/* clock.h - nanoseconds since the library loaded (CLOCK_MONOTONIC, a vDSO
 * call: no syscall on the allocation path). */
#ifndef CUMEMTRACE_CLOCK_H
#define CUMEMTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>

extern int64_t clock_origin_ns;

static inline int64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - clock_origin_ns;
}

#endif
