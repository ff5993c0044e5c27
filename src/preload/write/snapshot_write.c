/* snapshot_write.c - snapshot files: their names, a temporary file
 * published atomically (output.c), and the one line that says where it
 * went.  The document itself is the serialiser's (serialise.c), the same
 * for every reason; this file never reads the tracker's state.
 */
#include "snapshot_write.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump_guard.h"
#include "log.h"
#include "output.h"
#include "serialise.h"
#include "units.h"

/* `verb` is "wrote", or "rewrote" for an exit snapshot replaced at the C
 * exit: the last line said of a file gives the peak of what it holds. */
static void announce(const char *verb, const char *path, const struct serialise_said *said)
{
    char b[32];
    if (said->peak_device >= 0)
        log_msg(LOG_NOTE, "%s %s (peak %s on GPU %d)", verb, path,
                units_format_bytes(said->peak_bytes, b, sizeof b), said->peak_device);
    else
        log_msg(LOG_NOTE, "%s %s", verb, path);
}

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char name[16];
    unsigned next;
} counters[8];

/* The next file number of `reason`, from 0. */
static unsigned reason_index(const char *reason)
{
    unsigned n = 0;
    pthread_mutex_lock(&names_lock);
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        if (counters[i].name[0] == '\0')
            snprintf(counters[i].name, sizeof counters[i].name, "%s", reason);
        if (strncmp(counters[i].name, reason, sizeof counters[i].name - 1) == 0) {
            n = counters[i].next++;
            break;
        }
    }
    pthread_mutex_unlock(&names_lock);
    return n;
}

void snapshot_name_release(const char *reason, const char *path)
{
    char key[24];
    snprintf(key, sizeof key, ".%s.", reason);
    const char *at = NULL;
    for (const char *p = strstr(path, key); p != NULL; p = strstr(p + 1, key))
        at = p;
    if (at == NULL)
        return;
    char *end;
    unsigned long index = strtoul(at + strlen(key), &end, 10);
    if (end == at + strlen(key) || (*end != '\0' && *end != '.'))
        return;
    pthread_mutex_lock(&names_lock);
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        if (strncmp(counters[i].name, reason, sizeof counters[i].name - 1) == 0 &&
            counters[i].next == index + 1) {
            counters[i].next--;
            break;
        }
    pthread_mutex_unlock(&names_lock);
}

/* Publishes tmp under the first free number of `reason` from `final`'s
 * on: an earlier image of an exec chain (the same pid, counters from 0
 * again) may have written .exec.0.json, .oom.0.json... already.  A
 * pattern that names no number falls back to output_commit's ".N". */
static int commit_numbered(const char *tmp, const char *reason, char *final, size_t n,
                           char *actual, size_t len)
{
    for (int tries = 0; tries < 1000; tries++) {
        if (link(tmp, final) == 0) {
            unlink(tmp);
            snprintf(actual, len, "%s", final);
            return 0;
        }
        if (errno != EEXIST)
            break;
        char next[4096];
        if (output_expand(output_pattern(), reason, reason_index(reason), next,
                          sizeof next) != 0 || strcmp(next, final) == 0)
            break;
        snprintf(final, n, "%s", next);
    }
    if (errno != EEXIST) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return output_commit(tmp, final, false, actual, len);
}

static int write_guarded(const char *reason, const char *path,
                         const struct oom_info *oom, bool replace,
                         const char *signame, char *out_path, size_t out_len)
{
    static unsigned sequence;
    unsigned seq = __atomic_fetch_add(&sequence, 1, __ATOMIC_RELAXED);
    /* File names number each reason's new files from 0 without gaps
     * (oom.0, oom.1, ...): rewrites of a post-mortem take no number. */
    unsigned index = 0;
    if (path == NULL)
        index = reason_index(reason);
    char final[4096], tmp[4200], actual[4200];
    /* cumemtrace_dump(path) chose its own place: the variable is no fix */
    const char *fix = path != NULL && oom == NULL
                          ? "pass cumemtrace_dump() a path in a writable directory"
                          : "set CUMEMTRACE_OUTPUT to a writable directory";

    if (path != NULL) {
        snprintf(final, sizeof final, "%s", path);
    } else if (output_expand(output_pattern(), reason, index, final, sizeof final) != 0) {
        char b[96];
        log_msg(LOG_WARN, "cannot name the snapshot: CUMEMTRACE_OUTPUT='%s' "
                          "expands to more than %zu bytes; set a shorter one",
                log_abbrev(output_pattern(), b, sizeof b), sizeof final - 1);
        return -1;
    }

    int fd = output_open_temp(final, tmp, sizeof tmp);
    if (fd < 0) {
        /* the process holds every descriptor it may: no directory is the fix */
        if (errno == EMFILE || errno == ENFILE)
            fix = errno == EMFILE ? "the process had no descriptor left: raise the "
                                    "open-file limit (ulimit -n)"
                                  : "the system had no descriptor left";
        log_msg(LOG_WARN, "cannot write snapshot '%s': %s (%s)", final,
                strerror(errno), fix);
        output_manifest_failed(final, reason);
        return -1;
    }
    struct serialise_doc doc = {reason, seq, oom, signame, false};
    struct serialise_said said;
    int err = serialise_state(fd, &doc, NULL, &said) == 0 ? 0 : errno;
    /* The copy keeps the temporary's lock (it belongs to the open file)
     * until the name is published; close() is where NFS reports errors. */
    int hold = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (close(fd) != 0 && err == 0)
        err = errno;
    if (err != 0) {
        unlink(tmp);
        if (hold >= 0)
            close(hold);
        if (err == ENOMEM)
            log_msg(LOG_WARN, "cannot write snapshot '%s': out of memory", final);
        else
            log_msg(LOG_WARN, "cannot write snapshot '%s': %s (free some space, or %s)",
                    final, strerror(err), fix);
        output_manifest_failed(final, reason);
        return -1;
    }
    int committed = path == NULL && !replace
                        ? commit_numbered(tmp, reason, final, sizeof final, actual,
                                          sizeof actual)
                        : output_commit(tmp, final, replace, actual, sizeof actual);
    err = errno;
    if (hold >= 0)
        close(hold);
    if (committed != 0) {
        log_msg(LOG_WARN, "cannot write snapshot '%s': %s (%s)", final,
                strerror(err), fix);
        output_manifest_failed(final, reason);
        return -1;
    }
    /* The exec snapshot is not announced: the exec may still fail (a file
     * that is no program, each PATH entry Python's os.execvp tries), and
     * then the file is removed; no moment before a successful exec knows
     * it will succeed, and after it this image is gone.  `cumemtrace run`
     * lists it from the manifest, where it exists. */
    if (!replace) {
        output_manifest(actual, reason, signame);
        if (oom == NULL && strcmp(reason, "exec") != 0)
            announce("wrote", actual, &said);
    } else if (oom == NULL) {
        announce("rewrote", actual, &said);
    }
    if (out_path != NULL)
        snprintf(out_path, out_len, "%s", actual);
    return 0;
}

/* Every snapshot is written under a dump guard (dump_guard.h): no host
 * signal handler, cancel or default action ends it half-way. */
static int write_snapshot(const char *reason, const char *path,
                          const struct oom_info *oom, bool replace,
                          const char *signame, char *out_path, size_t out_len)
{
    struct dump_guard g;
    dump_guard_enter(&g);
    int rc = write_guarded(reason, path, oom, replace, signame, out_path, out_len);
    dump_guard_leave(&g);
    return rc;
}

int snapshot_write(const char *reason, const char *path,
                   const struct oom_info *oom, char *out_path, size_t out_len)
{
    return write_snapshot(reason, path, oom, path != NULL && oom != NULL, NULL,
                          out_path, out_len);
}

int snapshot_write_signal(const char *signame, char *out_path, size_t out_len)
{
    return write_snapshot("signal", NULL, NULL, false, signame, out_path, out_len);
}

int snapshot_rewrite(const char *reason, const char *path)
{
    return write_snapshot(reason, path, NULL, true, NULL, NULL, 0);
}
