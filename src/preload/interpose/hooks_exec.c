/* hooks_exec.c - the exec family: a successful exec replaces the image
 * without running atexit, so the exit snapshot of a process that touched
 * CUDA and then execs (a launcher script's python, a `torchrun` that
 * re-execs) would be lost.  Each wrapper writes that snapshot (reason
 * "exec") before calling the real function, and removes it again if the
 * exec fails: the process goes on and writes its exit snapshot later.
 *
 * Why these and not posix_spawn, system or popen: those start a new process
 * and leave this image running; only the exec family ends it.  glibc's
 * execvp/execl* reach execve internally, not through the PLT, so each is
 * wrapped on its own; the variadic execl* are turned into their execv*
 * forms as glibc does.
 *
 * Safety: nothing is written in a vfork child (it shares its parent's
 * memory and may only exec or _exit; CPython's subprocess uses vfork), told
 * by a pid other than the one our tables belong to (hooks_before_exec), nor
 * inside our own calls.  The real functions are looked up at start-up, so
 * a vfork child never enters the dynamic linker through us.  errno on a
 * failed exec is the real one.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ending.h"
#include "hooks.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

static execve_fn real_execve, real_execvpe;
static execv_fn real_execv, real_execvp;
static fexecve_fn real_fexecve;

void hooks_exec_init(void)
{
    *(void **)&real_execve = resolve_dlsym(RTLD_NEXT, "execve");
    *(void **)&real_execvpe = resolve_dlsym(RTLD_NEXT, "execvpe");
    *(void **)&real_execv = resolve_dlsym(RTLD_NEXT, "execv");
    *(void **)&real_execvp = resolve_dlsym(RTLD_NEXT, "execvp");
    *(void **)&real_fexecve = resolve_dlsym(RTLD_NEXT, "fexecve");
}

/* Called before our constructor (another library's constructor execs):
 * looked up now. */
static void *late(void *fn, const char *name)
{
    return fn != NULL ? fn : resolve_dlsym(RTLD_NEXT, name);
}

#define EXEC_BEGIN(check)                                                     \
    char written_[4400]; /* snapshot_write's longest name */                                             \
    hooks_before_exec((check), written_, sizeof written_)
/* `call` returns only when the exec failed */
#define EXEC_END(call)                                                        \
    do {                                                                      \
        int r_ = (call);                                                      \
        int e_ = errno;                                                       \
        hooks_exec_failed(written_);                                          \
        errno = e_;                                                           \
        return r_;                                                            \
    } while (0)

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[],
                                                  char *const envp[])
{
    execve_fn real = late((void *)real_execve, "execve");
    EXEC_BEGIN(path);
    EXEC_END(real(path, argv, envp));
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    execv_fn real = late((void *)real_execv, "execv");
    EXEC_BEGIN(path);
    EXEC_END(real(path, argv));
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    execv_fn real = late((void *)real_execvp, "execvp");
    EXEC_BEGIN(NULL);
    EXEC_END(real(file, argv));
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[],
                                                   char *const envp[])
{
    execve_fn real = late((void *)real_execvpe, "execvpe");
    EXEC_BEGIN(NULL);
    EXEC_END(real(file, argv, envp));
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[],
                                                   char *const envp[])
{
    fexecve_fn real = late((void *)real_fexecve, "fexecve");
    EXEC_BEGIN(NULL);
    EXEC_END(real(fd, argv, envp));
}

/* execl, execlp, execle: the arguments up to the NULL (and, for execle, the
 * environment after it) into an array on the stack, then the execv* form. */
#define COLLECT_ARGS(arg0, last, argv)                                        \
    size_t n_ = 1;                                                            \
    va_list ap_;                                                              \
    va_start(ap_, arg0);                                                      \
    while (va_arg(ap_, const char *) != NULL)                                 \
        n_++;                                                                 \
    va_end(ap_);                                                              \
    char *argv[n_ + 1];                                                       \
    argv[0] = (char *)(arg0);                                                 \
    va_start(ap_, arg0);                                                      \
    for (size_t i_ = 1; i_ <= n_; i_++)                                       \
        argv[i_] = va_arg(ap_, char *);                                       \
    last;                                                                     \
    va_end(ap_)

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, (void)0, argv);
    return execv(path, argv);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
    COLLECT_ARGS(arg, (void)0, argv);
    return execvp(file, argv);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
    char *const *envp;
    COLLECT_ARGS(arg, envp = va_arg(ap_, char *const *), argv);
    return execve(path, argv, envp);
}
