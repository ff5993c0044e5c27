/* outfile.c - see outfile.h.  The temporary is ".cumemtrace-tmp.<pid>.<n>"
 * in OUT's directory (a rename is atomic only within one file system),
 * created O_EXCL | O_NOFOLLOW, so nothing that already exists there is
 * opened. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int refuse(struct cli_error *err, const char *cmd, const char *path,
                  const struct stat *st)
{
    if (S_ISLNK(st->st_mode))
        return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': it is a symbolic link "
                          "(write to the file itself, or choose another -o path)", cmd, path);
    if (!S_ISREG(st->st_mode))
        return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': not a regular file (%s), "
                          "choose another -o path", cmd, path, errors_file_kind(st->st_mode));
    return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': %s (pass --force to "
                      "replace it, or -o another name)", cmd, path, strerror(EEXIST));
}

/* Refuses an existing OUT that is not a regular file (or any, without
 * replace); 0 when OUT is absent or may be replaced. */
static int check_target(const char *cmd, const char *path, bool replace,
                        struct cli_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': %s (choose another -o "
                          "path)", cmd, path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode) || !replace)
        return refuse(err, cmd, path, &st);
    return 0;
}

int outfile_open(struct outfile *o, const char *cmd, const char *path, bool replace,
                 struct cli_error *err)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    o->replace = replace;
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        return 0;
    }
    int rc = check_target(cmd, path, replace, err);
    if (rc != 0)
        return rc;
    const char *slash = strrchr(path, '/');
    int dirlen = slash == NULL ? 0 : (int)(slash - path + 1);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int fd = -1;
    for (unsigned i = 0; i < 100 && fd < 0; i++) {
        if (snprintf(o->tmp, sizeof o->tmp, "%.*s.cumemtrace-tmp.%d.%lx%u", dirlen, path,
                     (int)getpid(), (unsigned long)ts.tv_nsec, i) >= (int)sizeof o->tmp)
            return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': %s", cmd, path,
                              strerror(ENAMETOOLONG));
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int e = errno;
        o->tmp[0] = '\0';
        return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': %s (choose another -o "
                          "path)", cmd, path, strerror(e));
    }
    o->f = fdopen(fd, "w");
    if (o->f == NULL) {
        close(fd);
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': out of memory", cmd, path);
    }
    return 0;
}

int outfile_commit(struct outfile *o, const char *cmd, struct cli_error *err)
{
    if (o->f == stdout) {
        if (fflush(stdout) != 0 || ferror(stdout))
            return errors_set(err, CLI_EWRITE, "%s: cannot write to stdout: %s", cmd,
                              strerror(errno));
        return 0;
    }
    int bad = ferror(o->f);
    int e = bad ? (errno ? errno : EIO) : 0;
    if (fclose(o->f) != 0 && !bad) { /* the flush: where ENOSPC shows */
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (!bad) {
        /* it may have been put there since the open */
        int rc = check_target(cmd, o->path, o->replace, err);
        if (rc != 0) {
            unlink(o->tmp);
            o->tmp[0] = '\0';
            return rc;
        }
        /* without replace, an OUT that appeared since stays (no clobbering) */
        if ((o->replace ? rename(o->tmp, o->path)
                        : renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE)) == 0) {
            o->tmp[0] = '\0';
            return 0;
        }
        e = errno;
    }
    unlink(o->tmp);
    o->tmp[0] = '\0';
    return errors_set(err, CLI_EWRITE, "%s: cannot write '%s': %s%s", cmd, o->path,
                      strerror(e), e == ENOSPC || e == EDQUOT ? " (free some space)" : "");
}

void outfile_abort(struct outfile *o)
{
    if (o->f != NULL && o->f != stdout)
        fclose(o->f);
    o->f = NULL;
    if (o->tmp[0] != '\0')
        unlink(o->tmp);
    o->tmp[0] = '\0';
}
