/* sim_test.h - what the unit tests of the simulated device share
 * (tests/unit/test_sim_*.c; the test rule puts tests/sim on the include path).
 *
 * The simulated driver and runtime read SIMCUDA_* once per process, so every
 * case runs in a forked child with its own environment: the cmocka test in
 * the parent calls sim_test_run(env, body), the child clears SIMCUDA_* (all
 * but SIMCUDA_LOG, handy when debugging), sets env, runs body and exits 0.
 * The parent never calls CUDA.  Inside body use the SIM_CHECK* macros, not
 * cmocka's asserts (a cmocka failure in a child would resume the parent's
 * test list in the child): they print the expression and both values and
 * exit 1, which fails the cmocka test.
 */
#ifndef CUMEMTRACE_SIM_TEST_H
#define CUMEMTRACE_SIM_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda_api.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
/* Where device d's linear memory starts (src/simgpu/driver/driver.h). */
#define SIM_TEST_BASE(d) (UINT64_C(0x200000000000) + (uint64_t)(d) * UINT64_C(0x10000000000))

static inline void sim_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static inline void sim_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: check failed: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _exit(1);
}

static inline const char *sim_test_cu_name(CUresult r)
{
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS ? s : "(unknown CUresult)";
}

#define SIM_CHECK(cond)                                                   \
    do {                                                                  \
        if (!(cond))                                                      \
            sim_test_fail(__FILE__, __LINE__, "%s", #cond);               \
    } while (0)

#define SIM_CHECK_EQ(a, b)                                                        \
    do {                                                                          \
        unsigned long long a_ = (unsigned long long)(a);                          \
        unsigned long long b_ = (unsigned long long)(b);                          \
        if (a_ != b_)                                                             \
            sim_test_fail(__FILE__, __LINE__, "%s == %s: 0x%llx (%llu) != 0x%llx (%llu)", \
                          #a, #b, a_, a_, b_, b_);                                \
    } while (0)

#define SIM_CHECK_CU(call, want)                                                    \
    do {                                                                            \
        CUresult r_ = (call), w_ = (want);                                          \
        if (r_ != w_)                                                               \
            sim_test_fail(__FILE__, __LINE__, "%s returned %s (%d), expected %s (%d)", \
                          #call, sim_test_cu_name(r_), (int)r_, sim_test_cu_name(w_),  \
                          (int)w_);                                                 \
    } while (0)

#define SIM_CHECK_RT(call, want)                                                    \
    do {                                                                            \
        cudaError_t e_ = (call), w_ = (want);                                       \
        if (e_ != w_)                                                               \
            sim_test_fail(__FILE__, __LINE__, "%s returned %s (%d), expected %s (%d)", \
                          #call, cudaGetErrorName(e_), (int)e_, cudaGetErrorName(w_),  \
                          (int)w_);                                                 \
    } while (0)

/* cuInit, retain device d's primary context and make it current. */
static inline CUcontext sim_test_ctx(int d)
{
    CUcontext ctx = NULL;
    SIM_CHECK_CU(cuInit(0), CUDA_SUCCESS);
    SIM_CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, d), CUDA_SUCCESS);
    SIM_CHECK_CU(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    return ctx;
}

/* Free bytes of the current context's device. */
static inline uint64_t sim_test_free(void)
{
    size_t f = 0, t = 0;
    SIM_CHECK_CU(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    return f;
}

static inline void sim_test_clear_env(void)
{
    extern char **environ;
    char names[64][128];
    int n = 0;
    for (char **e = environ; *e != NULL && n < 64; e++) {
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (strncmp(*e, "SIMCUDA_", 8) == 0 && strncmp(*e, "SIMCUDA_LOG=", 12) != 0 &&
            len < sizeof names[0]) {
            memcpy(names[n], *e, len);
            names[n++][len] = '\0';
        }
    }
    for (int i = 0; i < n; i++)
        unsetenv(names[i]);
}

/* Runs body in a child whose environment has the "NAME=value" strings of
 * env (NULL-terminated, may be NULL) and SIMCUDA_CONTIGUOUS=1 unless env
 * says otherwise; fails the current cmocka test unless
 * the child exits 0.  When err is not NULL it receives the child's stderr
 * (NUL-terminated, truncated to errlen). */
static inline void sim_test_run_capture(const char *const *env, void (*body)(void), char *err,
                                        size_t errlen)
{
    char path[] = "/tmp/sim_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        alarm(60); /* a deadlock fails the test instead of hanging it */
        sim_test_clear_env();
        /* These tests check where the driver places memory: contiguously,
         * the explicit test option (a test of paging sets it to 0). */
        setenv("SIMCUDA_CONTIGUOUS", "1", 1);
        for (; env != NULL && *env != NULL; env++) {
            char name[128];
            const char *eq = strchr(*env, '=');
            if (eq == NULL || (size_t)(eq - *env) >= sizeof name)
                sim_test_fail(__FILE__, __LINE__, "bad environment entry '%s'", *env);
            memcpy(name, *env, (size_t)(eq - *env));
            name[eq - *env] = '\0';
            setenv(name, eq + 1, 1);
        }
        body();
        fflush(NULL);
        exit(0); /* exit, not _exit: LeakSanitizer checks the child too */
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        ;
    char out[8192];
    ssize_t n = pread(fd, out, sizeof out - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    if (err != NULL && errlen > 0) {
        size_t len = strlen(out) < errlen - 1 ? strlen(out) : errlen - 1;
        memcpy(err, out, len);
        err[len] = '\0';
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s", out);
        if (WIFSIGNALED(status))
            fail_msg("child killed by signal %d", WTERMSIG(status));
        else
            fail_msg("child exited with %d", WEXITSTATUS(status));
    }
}

static inline void sim_test_run(const char *const *env, void (*body)(void))
{
    sim_test_run_capture(env, body, NULL, 0);
}

/* Declares a cmocka test `name` that runs `body` with the given environment. */
#define SIM_TEST(name, body, ...)                                    \
    static void name(void **state)                                   \
    {                                                                \
        static const char *const env_[] = {__VA_ARGS__, NULL};       \
        (void)state;                                                 \
        sim_test_run(env_, body);                                    \
    }

#endif
