/* output.c - snapshot file names and atomic, non-clobbering writes.
 *
 * A snapshot appears complete or not at all: it is written to a temporary
 * file in the target directory and then linked (or renamed) into place.  We
 * never follow a symlink (O_NOFOLLOW, link(2) fails on an existing name) and
 * never overwrite a file this process did not write, so pointing
 * CUMEMTRACE_OUTPUT at a shared directory cannot destroy anything.
 */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

struct output_process output_process = {.rank = -1};

static void set_exe(const char *s, size_t n)
{
    if (n >= sizeof output_process.exe)
        n = sizeof output_process.exe - 1;
    memcpy(output_process.exe, s, n);
    output_process.exe[n] = '\0';
}

static void exe_name(void)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    const char *base = "unknown";
    if (n > 0) {
        path[n] = '\0';
        const char *slash = strrchr(path, '/');
        base = slash ? slash + 1 : path;
    }
    set_exe(base, strlen(base));

    /* "python train.py" is better named after train.py than after python. */
    if (strncmp(base, "python", 6) != 0)
        return;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f == NULL)
        return;
    char buf[4096];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    for (size_t off = strlen(buf) + 1; off < len; off += strlen(buf + off) + 1) {
        const char *arg = buf + off;
        if (arg[0] == '-')
            continue; /* an interpreter option; -m module: keep "python" */
        size_t al = strlen(arg);
        if (al > 3 && strcmp(arg + al - 3, ".py") == 0) {
            const char *s = strrchr(arg, '/');
            s = s ? s + 1 : arg;
            set_exe(s, strlen(s) - 3);
        }
        break;
    }
}

void output_init(void)
{
    exe_name();
    if (gethostname(output_process.host, sizeof output_process.host) != 0)
        strcpy(output_process.host, "unknown");
    output_process.host[sizeof output_process.host - 1] = '\0';
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK",
                                            "SLURM_PROCID"};
    for (int i = 0; i < 3; i++) {
        const char *v = secure_getenv(rank_vars[i]);
        char *end;
        if (v == NULL || *v == '\0')
            continue;
        long r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0 && r < 1000000) {
            output_process.rank = (int)r;
            break;
        }
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    output_process.start_wall_ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int append(char *out, size_t len, size_t *pos, const char *s)
{
    size_t n = strlen(s);
    if (*pos + n >= len)
        return -1;
    memcpy(out + *pos, s, n + 1);
    *pos += n;
    return 0;
}

int output_expand(const char *pattern, const char *reason, unsigned seq,
                  char *out, size_t len)
{
    char pat[4096];
    struct stat st;
    size_t plen = strlen(pattern);
    const char *deflt = output_process.rank >= 0 ? "cumemtrace.%e.%p.%r.json"
                                                 : "cumemtrace.%e.%p.json";
    if (strcmp(pattern, CONFIG_DEFAULT_OUTPUT) == 0)
        pattern = deflt;
    else if ((plen > 0 && pattern[plen - 1] == '/') ||
             (stat(pattern, &st) == 0 && S_ISDIR(st.st_mode))) {
        if (snprintf(pat, sizeof pat, "%s%s%s", pattern,
                     pattern[plen - 1] == '/' ? "" : "/", deflt) >= (int)sizeof pat)
            return -1;
        pattern = pat;
    }

    size_t pos = 0;
    out[0] = '\0';
    for (const char *p = pattern; *p; p++) {
        char tmp[64];
        const char *piece = tmp;
        if (*p != '%' || p[1] == '\0') {
            tmp[0] = *p;
            tmp[1] = '\0';
        } else {
            switch (*++p) {
            case 'p': snprintf(tmp, sizeof tmp, "%d", (int)getpid()); break;
            case 'e': piece = output_process.exe; break;
            case 'h': piece = output_process.host; break;
            case 'r':
                if (output_process.rank >= 0)
                    snprintf(tmp, sizeof tmp, "%d", output_process.rank);
                else
                    piece = "norank";
                break;
            case 't': {
                time_t t = (time_t)(output_process.start_wall_ns / 1000000000LL);
                struct tm tm;
                localtime_r(&t, &tm);
                strftime(tmp, sizeof tmp, "%Y%m%d-%H%M%S", &tm);
                break;
            }
            case '%': piece = "%"; break;
            default: /* unknown: keep it literally */
                snprintf(tmp, sizeof tmp, "%%%c", *p);
            }
        }
        if (append(out, len, &pos, piece) != 0)
            return -1;
    }
    if (strcmp(reason, "exit") == 0)
        return 0;
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".%s.%u", reason, seq);
    if (pos > 5 && strcmp(out + pos - 5, ".json") == 0) {
        pos -= 5;
        out[pos] = '\0';
        return append(out, len, &pos, suffix) || append(out, len, &pos, ".json");
    }
    return append(out, len, &pos, suffix);
}

int output_open_temp(const char *final, char *tmp, size_t tmplen)
{
    static unsigned counter;
    const char *slash = strrchr(final, '/');
    int dirlen = slash ? (int)(slash - final + 1) : 0;
    if (snprintf(tmp, tmplen, "%.*s.cumemtrace-tmp.%d.%u", dirlen, final,
                 (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED))
        >= (int)tmplen) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

int output_commit(const char *tmp, const char *final, bool replace,
                  char *actual, size_t len)
{
    int err = 0;
    if (replace) {
        if (rename(tmp, final) == 0) {
            snprintf(actual, len, "%s", final);
            return 0;
        }
        err = errno;
    } else {
        for (int n = 0; n < 1000; n++) {
            char name[4096];
            if (n == 0)
                snprintf(name, sizeof name, "%s", final);
            else
                snprintf(name, sizeof name, "%s.%d", final, n);
            if (link(tmp, name) == 0) {
                unlink(tmp);
                snprintf(actual, len, "%s", name);
                return 0;
            }
            err = errno;
            if (err != EEXIST)
                break;
        }
    }
    unlink(tmp);
    errno = err;
    return -1;
}

void output_manifest(const char *path)
{
    if (config.manifest[0] == '\0')
        return;
    char abs[PATH_MAX + 2], cwd[PATH_MAX];
    if (path[0] != '/' && getcwd(cwd, sizeof cwd) != NULL)
        snprintf(abs, sizeof abs, "%s/%s\n", cwd, path);
    else
        snprintf(abs, sizeof abs, "%s\n", path);
    int fd = open(config.manifest, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    ssize_t w = write(fd, abs, strlen(abs)); /* one write: lines never mix */
    (void)w;
    close(fd);
}
