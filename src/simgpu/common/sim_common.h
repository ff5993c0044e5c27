/* sim_common.h - what both halves of the simulated device share: reading
 * SIMCUDA_* variables, one-line messages, and SIMCUDA_FAIL fault rules.
 *
 * The Makefile links sim_common.c into libcuda.so.1 and into libcudart.so.13
 * (and the static runtime): each library has its own copy and its own state.
 * Everything here is hidden so that neither library exports these names and
 * neither binds to the other's copy at run time.
 */
#ifndef CUMEMTRACE_SIM_COMMON_H
#define CUMEMTRACE_SIM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Where the simulated driver puts device memory (driver_impl.h has the layout):
 * 16 devices' linear and VMM windows, and the 32-bit window of the pre-3.2
 * entry points.  The runtime uses these to tell device pointers, which are
 * not host memory (runtime_backing.c keeps what copies wrote), from host ones in copies. */
#define SIM_DEVICE_WINDOW_BASE UINT64_C(0x200000000000)
#define SIM_DEVICE_WINDOW_END (SIM_DEVICE_WINDOW_BASE + 16 * UINT64_C(0x10000000000))
#define SIM_V1_WINDOW_BASE UINT64_C(0x80000000)
#define SIM_V1_WINDOW_END UINT64_C(0x100000000)

/* The environment variable, or NULL when unset or in a setuid process. */
const char *sim_common_getenv(const char *name);

/* A byte size from the environment (units.h syntax).  Unset: dflt.
 * Malformed or outside [min, max]: one line on stderr from `speaker`
 * ("simcuda: ignoring SIMCUDA_MEMORY='abc': expected a size like 24GiB")
 * and dflt. */
uint64_t sim_common_env_size(const char *speaker, const char *name,
                             uint64_t dflt, uint64_t min, uint64_t max);

/* A decimal integer from the environment, same rules as sim_common_env_size. */
long sim_common_env_long(const char *speaker, const char *name, long dflt,
                         long min, long max);

/* 1 when the variable is set to something other than "" or "0". */
int sim_common_env_flag(const char *name);

/* Writes "speaker: <message>\n" to stderr with a single write(2), so lines
 * from several threads or processes never interleave. */
void sim_common_say(const char *speaker, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Makes room for item n of the array *items points at (*cap allocated, each
 * `size` bytes), doubling the allocation from `first` items: 0, or -1 when
 * out of host memory (the array then unchanged). */
int sim_common_grow(void *items, size_t n, size_t *cap, size_t size, size_t first);

/* ---- SIMCUDA_FAIL: "symbol:N", "symbol:N+", "symbol:N=CODE", comma-separated.
 * N counts the calls of that exported symbol from 1; "+" fails every call
 * from the Nth on; CODE is the numeric result to return instead of the
 * library's default failure. ---- */

#define SIM_FAULT_MAX 64 /* far more rules than any test needs */

struct sim_fault_rule {
    int sym;         /* index into the library's symbol table */
    unsigned long n; /* first failing call, 1-based */
    int from_on;     /* 1: calls n, n+1, ... fail; 0: only call n */
    long code;       /* result to force; 0 = the library's default */
};

struct sim_fault_set {
    int count;
    struct sim_fault_rule rule[SIM_FAULT_MAX];
};

/* Parses spec into set.  Each library owns one family of names: the runtime
 * the "cuda" ones (runtime_side = 1), the driver all others, so that an entry
 * is judged (and warned about) by exactly one library.  names[0..nnames) are
 * the symbols of this library that may fail.  A malformed entry of this
 * library's family is reported on stderr by `speaker` and ignored. */
void sim_common_fault_parse(struct sim_fault_set *set, const char *spec,
                            const char *speaker, int runtime_side,
                            const char *const *names, int nnames);

/* Whether call number `count` (1-based) of symbol `sym` must fail; if so
 * stores the rule's code (0 = the library's default) in *code. */
int sim_common_fault_hit(const struct sim_fault_set *set, int sym,
                         unsigned long count, long *code);

#pragma GCC visibility pop

#endif
