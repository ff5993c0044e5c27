/* rt_mark.c - the mark API of include/cumemtrace.h from a CUDA program, as a
 * test harness would use it (tests/e2e/test_mark.py).  Resolved with
 * dlsym(RTLD_DEFAULT) so the program also runs without the library, where it
 * says so and exits 3.
 *
 *   rt_mark DUMP.json   allocates in a pattern whose figures the test knows,
 *                       prints each cumemtrace_usage as "label: current
 *                       mark peak", and dumps inside the inner mark */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cumemtrace.h"
#include "progs.h"

static int (*begin)(void);
static int (*end)(int);
static int (*usage)(int, struct cumemtrace_usage *);
static int (*dump)(const char *);

static void show(const char *label)
{
    struct cumemtrace_usage u;
    int r = usage(0, &u);
    printf("%s: %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", label, r, u.current_bytes,
           u.mark_bytes, u.peak_bytes);
}

__attribute__((noinline)) static void *alloc_in_test(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

int main(int argc, char **argv)
{
    begin = (int (*)(void))dlsym(RTLD_DEFAULT, "cumemtrace_mark_begin");
    end = (int (*)(int))dlsym(RTLD_DEFAULT, "cumemtrace_mark_end");
    usage = (int (*)(int, struct cumemtrace_usage *))dlsym(RTLD_DEFAULT, "cumemtrace_usage");
    dump = (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_dump");
    if (!begin || !end || !usage || !dump || argc != 2) {
        fprintf(stderr, "rt_mark: libcumemtrace.so not preloaded (or no DUMP "
                        "argument)\n");
        return 3;
    }
    struct cumemtrace_usage u;
    printf("invalid: %d %d\n", usage(64, &u), usage(-2, &u));
    void *before = alloc_in_test(8 * MiB);  /* held before every mark */
    void *spike = alloc_in_test(32 * MiB);  /* the all-time peak: 40 MiB */
    CHECK(cudaFree(spike), cudaSuccess);
    show("start");
    int outer = begin();                    /* outer: base 8 */
    void *a = alloc_in_test(4 * MiB);       /* 12 */
    void *b = alloc_in_test(6 * MiB);       /* 18: outer's peak */
    CHECK(cudaFree(b), cudaSuccess);        /* 12 */
    show("outer");
    int inner = begin();                    /* inner: base 12 */
    void *c = alloc_in_test(2 * MiB);       /* 14: inner's peak, below outer's */
    show("inner");
    fflush(stdout);
    pid_t child = fork();                   /* starts with an empty tracker, no marks */
    if (child == 0) {
        printf("child end: %d\n", end(inner));
        (void)alloc_in_test(2 * MiB);
        show("child");
        fflush(stdout);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    if (dump(argv[1]) != 0)
        return 1;
    CHECK(cudaFree(c), cudaSuccess);        /* 12 */
    printf("wrong end: %d\n", end(outer));  /* refused: inner is innermost */
    printf("end inner: %d\n", end(inner));
    show("outer again");                    /* peak still 18 */
    printf("end outer: %d\n", end(outer));
    show("no mark");                        /* the whole run: peak 40 */
    printf("end none: %d\n", end(1));
    CHECK(cudaFree(a), cudaSuccess);
    CHECK(cudaFree(before), cudaSuccess);
    return 0;
}
