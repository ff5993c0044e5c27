/* rt_outputs.c - scenarios for where snapshots go (tests/e2e/test_outputs.py).
 *
 *   many N           N cudaMalloc/cudaFree pairs, then exit: a large exit
 *                    dump (2N events) with no large live set
 *   exec PROG ARG..  3 MiB live, then execv(PROG, [PROG, ARG..]): the
 *                    pre-exec image's snapshot must not be lost
 *   execvp PROG ..   the same through execvp (PATH search)
 *   execl PROG       the same through execl (a variadic exec)
 *   exec-fail        execv of a missing program fails; 5 MiB more, exit
 *   vfork            a vfork child execs /bin/true; the parent frees, exits
 *   dump PATH        3 MiB live, cumemtrace_dump(PATH); prints its result
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"

static int many(long n)
{
    for (long i = 0; i < n; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 4096), cudaSuccess);
        CHECK(cudaFree(p), cudaSuccess);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "many";
    void *p;
    if (strcmp(s, "many") == 0)
        return many(argc > 2 ? atol(argv[2]) : 1000);
    CHECK(cudaMalloc(&p, 3 * MiB), cudaSuccess);
    fflush(stdout);
    if (strcmp(s, "exec") == 0 && argc > 2) {
        execv(argv[2], argv + 2);
    } else if (strcmp(s, "execvp") == 0 && argc > 2) {
        execvp(argv[2], argv + 2);
    } else if (strcmp(s, "execl") == 0 && argc > 2) {
        execl(argv[2], argv[2], (char *)NULL);
    } else if (strcmp(s, "exec-fail") == 0) {
        char *args[] = {"/nonexistent/program", NULL};
        int r = execv(args[0], args);
        printf("execv returned %d errno %s\n", r, strerror(errno));
        CHECK(cudaMalloc(&p, 5 * MiB), cudaSuccess);
        return 0;
    } else if (strcmp(s, "vfork") == 0) {
        char *args[] = {"/bin/true", NULL};
        pid_t pid = vfork();
        if (pid == 0) {
            execv(args[0], args);
            _exit(127);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        printf("child status %d\n", status);
        CHECK(cudaFree(p), cudaSuccess);
        return 0;
    } else if (strcmp(s, "dump") == 0 && argc > 2) {
        int (*dump)(const char *) = NULL;
        *(void **)&dump = dlsym(RTLD_DEFAULT, "cumemtrace_dump");
        printf("dump returned %d\n", dump ? dump(argv[2]) : -2);
        return 0;
    } else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    fprintf(stderr, "exec %s failed: %s\n", argv[2], strerror(errno));
    return 127;
}
