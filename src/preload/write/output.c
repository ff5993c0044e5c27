/* output.c - snapshot file names and atomic, non-clobbering writes.
 *
 * A snapshot appears complete or not at all: it is written to a temporary
 * file in the target directory and then linked (or renamed) into place.  We
 * never follow a symlink (O_NOFOLLOW, link(2) fails on an existing name) and
 * never overwrite a file this process did not write, so pointing
 * CUMEMTRACE_OUTPUT at a shared directory cannot destroy anything.
 *
 * Temporary names are ".cumemtrace-tmp.<pid>.<64 random bits>", created
 * O_EXCL and retried on a collision: a name another user (or a dump killed
 * half-way in a container that reuses pids) left behind never stops a write.
 * The writer holds flock(LOCK_EX) on its temporary from creation until the
 * name is gone (published or removed), so a temporary of ours that nobody
 * has locked is provably a dead writer's: output_clean_stale removes those,
 * and only those of our effective user.
 */
#include "output.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "own_fd.h"

struct output_process output_process = {.rank = -1, .local_rank = -1, .world_size = -1};

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

/* The first of vars[0..3) that holds a whole number from `min` below a
 * million (torchrun, Open MPI and SLURM each set one), or -1. */
static int env_count(const char *const vars[3], long min)
{
    for (int i = 0; i < 3; i++) {
        const char *v = secure_getenv(vars[i]);
        char *end;
        if (v == NULL || *v == '\0')
            continue;
        long r = strtol(v, &end, 10);
        if (*end == '\0' && r >= min && r < 1000000)
            return (int)r;
    }
    return -1;
}

void output_read_rank(void)
{
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK",
                                            "SLURM_PROCID"};
    static const char *const local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "SLURM_LOCALID"};
    static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                            "SLURM_NTASKS"};
    output_process.rank = env_count(rank_vars, 0);
    output_process.local_rank = env_count(local_vars, 0);
    output_process.world_size = env_count(size_vars, 1);
}

void output_init(void)
{
    exe_name();
    if (gethostname(output_process.host, sizeof output_process.host) != 0)
        strcpy(output_process.host, "unknown");
    output_process.host[sizeof output_process.host - 1] = '\0';
    output_read_rank();
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

/* A name from outside (the exe's, the host's) as one file-name component:
 * '/' becomes '_', and so do "." and "..", so "%h" of a host named
 * "../../x" cannot put the file two directories up. */
static const char *component(const char *s, char *buf, size_t n)
{
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return "_";
    if (strchr(s, '/') == NULL)
        return s;
    snprintf(buf, n, "%s", s);
    for (char *p = buf; *p; p++)
        if (*p == '/')
            *p = '_';
    return buf;
}

/* True when a pattern names a directory: the default, a trailing '/', or
 * an existing directory. */
static bool names_dir(const char *pattern)
{
    struct stat st;
    size_t n = strlen(pattern);
    return strcmp(pattern, CONFIG_DEFAULT_OUTPUT) == 0 || (n > 0 && pattern[n - 1] == '/') ||
           (stat(pattern, &st) == 0 && S_ISDIR(st.st_mode));
}

int output_expand(const char *pattern, const char *reason, unsigned seq,
                  char *out, size_t len)
{
    char pat[4096];
    size_t plen = strlen(pattern);
    const char *deflt = output_process.rank >= 0 ? "cumemtrace.%e.%p.%r.json"
                                                 : "cumemtrace.%e.%p.json";
    if (strcmp(pattern, CONFIG_DEFAULT_OUTPUT) == 0)
        pattern = deflt;
    else if (names_dir(pattern)) {
        if (snprintf(pat, sizeof pat, "%s%s%s", pattern,
                     pattern[plen - 1] == '/' ? "" : "/", deflt) >= (int)sizeof pat)
            return -1;
        pattern = pat;
    }

    size_t pos = 0;
    out[0] = '\0';
    char name[sizeof output_process.exe > sizeof output_process.host
                  ? sizeof output_process.exe : sizeof output_process.host];
    for (const char *p = pattern; *p; p++) {
        char tmp[64];
        const char *piece = tmp;
        if (*p != '%' || p[1] == '\0') {
            tmp[0] = *p;
            tmp[1] = '\0';
        } else {
            switch (*++p) {
            case 'p': snprintf(tmp, sizeof tmp, "%d", (int)getpid()); break;
            case 'e': piece = component(output_process.exe, name, sizeof name); break;
            case 'h': piece = component(output_process.host, name, sizeof name); break;
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
        return append(out, len, &pos, suffix) != 0 || append(out, len, &pos, ".json") != 0
                   ? -1 : 0;
    }
    return append(out, len, &pos, suffix);
}

/* Random bits for a temporary name: the kernel's when it has them, else the
 * clock, pid and a stack address, mixed (splitmix64's finaliser). */
static uint64_t random_bits(void)
{
    static uint64_t counter;
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) == (ssize_t)sizeof x)
        return x;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
        ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&ts ^
        __atomic_add_fetch(&counter, 0x9e3779b97f4a7c15ULL, __ATOMIC_RELAXED);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

#define TEMP_PREFIX ".cumemtrace-tmp."
#define TEMP_TRIES 100 /* a name taken 100 times in a row: 64 random bits say attack */

int output_open_temp(const char *final, char *tmp, size_t tmplen)
{
    const char *slash = strrchr(final, '/');
    int dirlen = slash ? (int)(slash - final + 1) : 0;
    for (int i = 0; i < TEMP_TRIES; i++) {
        if (snprintf(tmp, tmplen, "%.*s" TEMP_PREFIX "%d.%016" PRIx64, dirlen,
                     final, (int)getpid(), random_bits()) >= (int)tmplen) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = own_fd_high(open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
        if (fd < 0) {
            if (errno == EEXIST)
                continue; /* someone else's name, or a dead writer's: another */
            return -1;
        }
        /* The lock is our proof of life until the file is published.  Taken
         * already: a cleaner found the fresh name unlocked and is removing
         * it; leave it to the cleaner and take another name. */
        if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
            close(fd);
            continue;
        }
        /* A cleaner may have locked, removed and released it between our
         * open and our lock (another rank starting in this directory):
         * then the name is gone and our file would never be published.
         * Once we hold the lock no cleaner removes it, so check once. */
        struct stat mine, named;
        if (fstat(fd, &mine) != 0 || lstat(tmp, &named) != 0 ||
            mine.st_ino != named.st_ino || mine.st_dev != named.st_dev) {
            close(fd);
            continue;
        }
        return fd;
    }
    errno = EEXIST;
    return -1;
}

/* ".cumemtrace-tmp.<pid>.<16 hex digits>", exactly what output_open_temp
 * makes (older names without the random part were never locked: not ours
 * to judge). */
static bool temp_name(const char *n)
{
    size_t k = strlen(TEMP_PREFIX), d = 0;
    if (strncmp(n, TEMP_PREFIX, k) != 0)
        return false;
    n += k;
    while (n[d] >= '0' && n[d] <= '9')
        d++;
    if (d == 0 || n[d] != '.')
        return false;
    n += d + 1;
    for (d = 0; n[d] != '\0'; d++)
        if (!isxdigit((unsigned char)n[d]))
            return false;
    return d == 16;
}

void output_clean_stale(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
    if (dfd < 0)
        return;
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        return;
    }
    uid_t me = geteuid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st, fst;
        if (!temp_name(e->d_name) ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != me || st.st_nlink != 1)
            continue;
        int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        /* Unlocked: its writer is gone (a live one holds the lock from
         * creation to publication).  Removed while we hold the lock, so a
         * writer that has just created it sees the lock taken and moves on. */
        if (fstat(fd, &fst) == 0 && fst.st_dev == st.st_dev &&
            fst.st_ino == st.st_ino && flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (unlinkat(dfd, e->d_name, 0) == 0)
                LOG(LOG_DEBUG, "removed %s/%s, left by a dump that was killed",
                        dir, e->d_name);
        }
        close(fd);
    }
    closedir(d);
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

/* The directory part of `path`: "." for a bare name. */
static void dir_of(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, n, ".");
    else if (slash == path)
        snprintf(dir, n, "/");
    else
        snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* 0 when a file can be created in `dir` (tried for real: permissions, ACLs,
 * a read-only mount, a missing directory all show), else the errno. */
static int probe_dir(const char *dir)
{
    char name[4200], tmp[4300];
    snprintf(name, sizeof name, "%s/probe", dir);
    int fd = output_open_temp(name, tmp, sizeof tmp);
    if (fd < 0)
        return errno;
    unlink(tmp);
    close(fd);
    return 0;
}

/* Where dumps are named from when CUMEMTRACE_OUTPUT's place is unusable;
 * published once by output_prepare. */
static char fallback[4096];
static const char *pattern_in_use;

const char *output_pattern(void)
{
    const char *p = __atomic_load_n(&pattern_in_use, __ATOMIC_ACQUIRE);
    return p ? p : config.output;
}

/* Tries the current directory, $TMPDIR and /tmp, in that order; keeps the
 * file part of the pattern (`base`, "" for the default name).  The directory
 * returned may be `cwd`, the caller's buffer: it outlives this call. */
static const char *fall_back(const char *dir, const char *base, char *cwd, size_t cwd_n)
{
    const char *cands[3] = {getcwd(cwd, cwd_n), secure_getenv("TMPDIR"), "/tmp"};
    for (int i = 0; i < 3; i++) {
        if (cands[i] == NULL || cands[i][0] == '\0' || strcmp(cands[i], dir) == 0 ||
            probe_dir(cands[i]) != 0)
            continue;
        if (snprintf(fallback, sizeof fallback, "%s/%s", cands[i], base) >=
            (int)sizeof fallback)
            continue;
        __atomic_store_n(&pattern_in_use, fallback, __ATOMIC_RELEASE);
        return cands[i];
    }
    return NULL;
}

void output_prepare(void)
{
    char final[4096], dir[4096], cwd[PATH_MAX], b1[96], b2[96];
    const char *pattern = config.output;
    if (output_expand(pattern, "exit", 0, final, sizeof final) != 0)
        return; /* the first dump says so */
    dir_of(final, dir, sizeof dir);
    const char *slash = strrchr(pattern, '/');
    const char *base = slash ? slash + 1 : pattern;
    if (names_dir(pattern))
        base = ""; /* the default file name in whichever directory */
    struct stat st;
    const char *to;
    int err;
    if (stat(final, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        /* a FIFO would block whoever opens it, a device is not a file; and
         * its directory is no choice of the user's (/dev for /dev/null):
         * the documented fallbacks, the current directory first */
        to = fall_back("", "", cwd, sizeof cwd);
        log_msg(LOG_WARN, "CUMEMTRACE_OUTPUT names '%s', which is not a regular file; "
                          "snapshots go to %s/ under their default names instead (set "
                          "CUMEMTRACE_OUTPUT to a directory or a file name)",
                log_abbrev(final, b1, sizeof b1), to ? log_abbrev(to, b2, sizeof b2)
                                                      : "nowhere");
    } else if ((err = probe_dir(dir)) != 0) {
        if ((to = fall_back(dir, base, cwd, sizeof cwd)) != NULL)
            log_msg(LOG_WARN, "cannot write snapshots to %s/: %s; writing them to %s/ "
                              "instead (set CUMEMTRACE_OUTPUT to a writable directory)",
                    log_abbrev(dir, b1, sizeof b1), strerror(err),
                    log_abbrev(to, b2, sizeof b2));
        else
            log_msg(LOG_WARN, "cannot write snapshots to %s/: %s, nor to the current "
                              "directory, $TMPDIR or /tmp; no snapshot can be written (set "
                              "CUMEMTRACE_OUTPUT to a writable directory)",
                    log_abbrev(dir, b1, sizeof b1), strerror(err));
        return;
    }
    output_clean_stale(dir);
}

/* Why CUMEMTRACE_MANIFEST is not the list `cumemtrace run` made, or NULL.
 * Never blocks: a special file is refused before it is opened (opening a
 * FIFO for writing waits for a reader; opening some devices acts), and the
 * open is O_NONBLOCK against a swap in between. */
static const char *manifest_refusal(int *fdp)
{
    static char why[160];
    struct stat st;
    *fdp = -1;
    if (config.manifest_key[0] == '\0')
        return "CUMEMTRACE_MANIFEST_KEY is not set";
    if (stat(config.manifest, &st) != 0) {
        snprintf(why, sizeof why, "%s", strerror(errno));
        return why;
    }
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    int fd = own_fd_high(open(config.manifest, O_RDWR | O_APPEND | O_NONBLOCK | O_NOCTTY |
                                                   O_NOFOLLOW | O_CLOEXEC));
    if (fd < 0) {
        snprintf(why, sizeof why, "%s", strerror(errno));
        return why;
    }
    char want[sizeof config.manifest_key + 32], got[sizeof want];
    int n = snprintf(want, sizeof want, "cumemtrace-manifest %s\n", config.manifest_key);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return "not a regular file";
    }
    if (pread(fd, got, (size_t)n, 0) != n || memcmp(got, want, (size_t)n) != 0) {
        close(fd);
        return "its first line is not the one `cumemtrace run` wrote";
    }
    *fdp = fd;
    return NULL;
}

/* One line into CUMEMTRACE_MANIFEST, in one write (lines never mix). */
static void manifest_append(const char *line)
{
    static int warned;
    if (config.manifest[0] == '\0')
        return;
    int saved = errno, fd;
    const char *why = manifest_refusal(&fd);
    if (why != NULL) {
        char b[96];
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_ACQ_REL))
            log_msg(LOG_WARN, "not listing snapshots in CUMEMTRACE_MANIFEST='%s': %s; "
                              "unset CUMEMTRACE_MANIFEST (only `cumemtrace run` sets it)",
                    log_abbrev(config.manifest, b, sizeof b), why);
        errno = saved;
        return;
    }
    ssize_t w = write(fd, line, strlen(line));
    (void)w;
    close(fd);
    errno = saved;
}

/* "<what> <pid> <tag> <absolute path>" */
static void manifest_file(const char *what, const char *tag, const char *path)
{
    if (config.manifest[0] == '\0')
        return;
    char line[PATH_MAX + 128], cwd[PATH_MAX];
    int saved = errno;
    bool rel = path[0] != '/' && getcwd(cwd, sizeof cwd) != NULL;
    snprintf(line, sizeof line, "%s %d %s %s%s%s\n", what, (int)getpid(), tag,
             rel ? cwd : "", rel ? "/" : "", path);
    errno = saved;
    manifest_append(line);
}

void output_manifest(const char *path, const char *reason, const char *signame)
{
    char tag[64];
    snprintf(tag, sizeof tag, "%s%s%s", reason, signame ? ":" : "", signame ? signame : "");
    manifest_file("wrote", tag, path);
}

void output_manifest_stream(const char *path)
{
    manifest_file("stream", "-", path);
}

void output_manifest_failed(const char *path, const char *reason)
{
    manifest_file("failed", reason, path);
}

void output_manifest_cuda(void)
{
    if (config.manifest[0] == '\0')
        return;
    char line[320];
    snprintf(line, sizeof line, "cuda %d %s\n", (int)getpid(), output_process.exe);
    manifest_append(line);
}
