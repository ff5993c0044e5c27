/* run.c - `cumemtrace run -- COMMAND ARGS...`: run a command with the
 * tracer preloaded and tell which snapshots it wrote; docs/cli.md's `run`
 * section is the contract (where the library is looked for, the command's
 * environment, the snapshot list and its key, signals, exit status).
 *
 * Signals: one the kernel generated (si_code SI_KERNEL: a terminal's Ctrl-C
 * already reached the child, which is in our foreground process group) is
 * not forwarded: it would arrive twice and break Python's clean
 * KeyboardInterrupt.  They stay blocked from before fork() until the
 * handlers are in place, so none is lost or handled by the wrong process.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "pyflags.h"
#include "settings.h"
#include "units.h"

#define STR_(x) #x
#define STR(x) STR_(x) /* a number macro as a string literal */

#define LIB_NAME "libcumemtrace.so"

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

static volatile sig_atomic_t child;

static void forward(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (info != NULL && info->si_code == SI_KERNEL)
        return;
    if (child > 0)
        kill((pid_t)child, sig);
}

/* Fills lib with the library's absolute path; on failure fills looked with
 * the places tried.  $CUMEMTRACE_LIB, when set, is the only place: a user
 * who names a library wants that one or an error, not a silent fallback. */
static int find_library(char *lib, size_t n, char *looked, size_t ln)
{
    const char *env = getenv("CUMEMTRACE_LIB");
    if (env != NULL && env[0] != '\0') {
        struct stat st;
        if (stat(env, &st) == 0 && S_ISREG(st.st_mode) && access(env, R_OK) == 0 &&
            realpath(env, lib) != NULL && strlen(lib) < n)
            return 0;
        snprintf(looked, ln, "CUMEMTRACE_LIB=%s (%s)", env,
                 access(env, F_OK) != 0 ? strerror(errno) : "not a readable file");
        return -1;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        snprintf(looked, ln, "nowhere: /proc/self/exe is unreadable (%s)", strerror(errno));
        return -1;
    }
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL)
        *slash = '\0';
    char a[PATH_MAX + 32], b[PATH_MAX + 32];
    snprintf(a, sizeof a, "%s/%s", exe, LIB_NAME);
    snprintf(b, sizeof b, "%s/../lib/%s", exe, LIB_NAME);
    const char *cand[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        if (access(cand[i], R_OK) == 0 && realpath(cand[i], lib) != NULL &&
            strlen(lib) < n)
            return 0;
    }
    snprintf(looked, ln, "%s, %s", a, b);
    return -1;
}

/* PYTHONPATH with the PyTorch layer's start-up directory first:
 * share/cumemtrace/torchboot beside the library (build tree) or in the
 * prefix; *was gets what the host's sitecustomize restores: "=" and the old value, or "-" when there was none.  NULL when the
 * directory is not there (the run goes on without it) or on OOM. */
static char *python_path(const char *lib, char **was)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", lib);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    char a[PATH_MAX + 64], b[PATH_MAX + 64], real[PATH_MAX];
    snprintf(a, sizeof a, "%s/share/cumemtrace/torchboot", dir);
    snprintf(b, sizeof b, "%s/../share/cumemtrace/torchboot", dir);
    const char *cand[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        char probe[PATH_MAX + 96];
        snprintf(probe, sizeof probe, "%s/sitecustomize.py", cand[i]);
        if (access(probe, R_OK) != 0 || realpath(cand[i], real) == NULL)
            continue;
        const char *old = getenv("PYTHONPATH");
        char *v;
        if (asprintf(&v, "%s%s%s", real, old && old[0] ? ":" : "", old ? old : "") < 0)
            return NULL;
        if (asprintf(was, "%s%s", old ? "=" : "-", old ? old : "") < 0) {
            free(v);
            *was = NULL; /* asprintf leaves it undefined */
            return NULL;
        }
        return v;
    }
    return NULL;
}

/* A sanitizer runtime (libasan.so.8, libtsan.so.2, ...) must stay first in
 * LD_PRELOAD or it refuses to start. */
static bool sanitizer_runtime(const char *entry, size_t n)
{
    static const char *const names[] = {"libasan.so", "libtsan.so", "libubsan.so",
                                        "libhwasan.so", "libmsan.so"};
    const char *base = entry;
    for (size_t i = 0; i < n; i++)
        if (entry[i] == '/')
            base = entry + i + 1;
    size_t bn = n - (size_t)(base - entry);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t m = strlen(names[k]);
        if (bn >= m && strncmp(base, names[k], m) == 0)
            return true;
    }
    return false;
}

/* LD_PRELOAD for the command: our library first, so that our wrappers win
 * over any other interposer's, then the existing entries (':' or blank
 * separated, as ld.so reads them) - except that sanitizer runtimes stay in
 * front of everything.  A malloc'd string, or NULL when out of memory. */
static char *preload_value(const char *lib, const char *old)
{
    if (old == NULL)
        old = "";
    size_t cap = strlen(lib) + strlen(old) + 2;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    size_t used = 0;
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1) {
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? ":" : "", lib);
            continue;
        }
        for (const char *p = old; *p;) {
            size_t n = strcspn(p, ": ");
            if (n > 0 && sanitizer_runtime(p, n) == (pass == 0))
                used += (size_t)snprintf(out + used, cap - used, "%s%.*s", used ? ":" : "",
                                         (int)n, p);
            p += n;
            p += strspn(p, ": ");
        }
    }
    return out;
}

static int set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0) {
        fprintf(stderr, "cumemtrace: run: cannot set %s: %s\n", name, strerror(errno));
        return -1;
    }
    return 0;
}

/* One record of the manifest (src/preload/write/output.h): "cuda <pid> <exe>",
 * "wrote <pid> <reason>[:<signal>] <path>", "failed <pid> <reason> <path>"
 * (a snapshot the library could not write) or "stream <pid> - <path>".  A
 * path may hold a newline: the record then spans lines (records_of). */
struct mline {
    char kind;  /* 'c', 'w', 'f', 's' */
    long pid;
    char *tag, *path; /* into the line */
    char *line;
};

static bool parse_mline(char *line, struct mline *m)
{
    m->line = line;
    m->pid = -1;
    m->tag = (char *)"exit";
    char *sp1 = strchr(line, ' ');
    if (sp1 == NULL)
        return false;
    *sp1 = '\0';
    m->pid = strtol(sp1 + 1, NULL, 10);
    char *sp2 = strchr(sp1 + 1, ' ');
    if (sp2 == NULL)
        return false;
    if (strcmp(line, "cuda") == 0) {
        m->kind = 'c';
        m->path = sp2 + 1; /* the exe */
        return true;
    }
    char *sp3 = strchr(sp2 + 1, ' ');
    if (sp3 == NULL)
        return false;
    *sp3 = '\0';
    m->tag = sp2 + 1;
    m->path = sp3 + 1;
    char *colon = strchr(m->tag, ':'); /* "signal:SIGTERM" is said "signal SIGTERM" */
    if (colon != NULL)
        *colon = ' ';
    m->kind = strcmp(line, "wrote") == 0    ? 'w'
              : strcmp(line, "stream") == 0 ? 's'
              : strcmp(line, "failed") == 0 ? 'f'
                                            : 0;
    return m->kind != 0;
}

/* Whether a line of the manifest starts a record: a keyword and a pid. */
static bool record_start(const char *line)
{
    static const char *const keys[] = {"cuda ", "wrote ", "failed ", "stream "};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        size_t k = strlen(keys[i]);
        if (strncmp(line, keys[i], k) == 0 && line[k] >= '0' && line[k] <= '9')
            return true;
    }
    return false;
}

/* Appends line to the record *rec after a newline (a path that held one);
 * false when out of memory. */
static bool continue_record(char **rec, const char *line)
{
    size_t a = strlen(*rec), b = strlen(line);
    char *g = realloc(*rec, a + b + 2);
    if (g == NULL)
        return false;
    g[a] = '\n';
    memcpy(g + a + 1, line, b + 1);
    *rec = g;
    return true;
}

/* The manifest's records, each a malloc'd string: a line that starts none
 * (no keyword and pid) continues the one before - the library writes each
 * record with one write(), and a path may hold a newline. */
static char **records_of(FILE *f, size_t *count)
{
    char **recs = NULL, *line = NULL;
    size_t n = 0, cap = 0, lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        bool joins = n > 0 && !record_start(line);
        if (joins) {
            if (!continue_record(&recs[n - 1], line))
                break;
            continue;
        }
        if (len == 0 || snapshot_vec_reserve((void **)&recs, &cap, sizeof *recs, n + 1) != 0)
            continue;
        if ((recs[n] = strdup(line)) != NULL)
            n++;
    }
    free(line);
    *count = n;
    return recs;
}

/* Prints, per process, which files it wrote and why (exit, oom, signal,
 * periodic, api), those it could not write, and the stream left by a
 * process that wrote nothing at its end (SIGKILL, _exit).  A process that
 * could not open the list (out of descriptors) lists nothing, so "no CUDA"
 * is said with that caveat. */
static void print_manifest(const char *path, const char *header)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "cumemtrace: run: cannot read the snapshot list %s: %s\n", path,
                strerror(errno));
        return;
    }
    char head[128];
    if (fgets(head, sizeof head, f) == NULL || strcmp(head, header) != 0) {
        fprintf(stderr, "cumemtrace: run: the snapshot list %s was overwritten by another "
                "program; list the snapshot files yourself\n", path);
        fclose(f);
        return;
    }
    struct mline *lines = NULL;
    size_t n = 0, cap = 0, nwrote = 0, ncuda = 0, nrecs = 0;
    char **recs = records_of(f, &nrecs);
    fclose(f);
    for (size_t r = 0; r < nrecs; r++) {
        char *copy = recs[r];
        bool seen = false;
        if (snapshot_vec_reserve((void **)&lines, &cap, sizeof *lines, n + 1) != 0) {
            free(copy);
            continue;
        }
        if (!parse_mline(copy, &lines[n]) ||
            (lines[n].kind == 'w' && access(lines[n].path, F_OK) != 0)) {
            free(copy); /* a pre-exec snapshot removed when the exec failed */
            continue;
        }
        /* one file written twice (a post-mortem rewritten) is one file */
        for (size_t i = 0; i < n && !seen; i++)
            seen = lines[i].kind == lines[n].kind &&
                   (lines[n].kind == 'c' ? lines[i].pid == lines[n].pid
                                         : strcmp(lines[i].path, lines[n].path) == 0);
        if (seen) {
            free(copy);
            continue;
        }
        nwrote += lines[n].kind == 'w';
        ncuda += lines[n].kind == 'c';
        n++;
    }
    free(recs);
    size_t nfailed = 0;
    for (size_t i = 0; i < n; i++)
        nfailed += lines[i].kind == 'f';
    if (nwrote == 0 && ncuda == 0 && nfailed == 0)
        fprintf(stderr, "cumemtrace: no snapshot written: no process of the command "
                        "used CUDA, or none could say so (a process out of file "
                        "descriptors cannot open the list of snapshots; the library "
                        "warns on stderr then)\n");
    else if (nwrote == 0 && nfailed > 0)
        fprintf(stderr, "cumemtrace: no snapshot written\n");
    else if (nwrote > 0)
        fprintf(stderr, "cumemtrace: %zu snapshot%s written:\n", nwrote, nwrote == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        struct mline *m = &lines[i];
        if (m->kind != 'w')
            continue;
        if (m->pid >= 0)
            errors_line("  ", "%s  (%s, pid %ld)", m->path, m->tag, m->pid);
        else
            errors_line("  ", "%s", m->path);
    }
    for (size_t i = 0; i < n; i++) {
        struct mline *m = &lines[i];
        if (m->kind != 'f')
            continue;
        errors_line("cumemtrace: ", "pid %ld could not write its %s snapshot %s (its "
                    "warning above says why)", m->pid, m->tag, m->path);
    }
    /* Processes that used CUDA and wrote nothing at their end. */
    for (size_t i = 0; i < n; i++) {
        struct mline *m = &lines[i];
        if (m->kind != 'c')
            continue;
        bool wrote = false, final = false;
        const char *stream = NULL;
        for (size_t k = 0; k < n; k++) {
            if (lines[k].pid != m->pid)
                continue;
            wrote |= lines[k].kind == 'w' || lines[k].kind == 'f'; /* 'f': said above */
            /* its end's own record: a stream left beside one was kept
             * (CUMEMTRACE_STREAM=keep), not the sign of a kill */
            final |= lines[k].kind == 'w' && (strncmp(lines[k].tag, "exit", 4) == 0 ||
                                             strncmp(lines[k].tag, "signal", 6) == 0 ||
                                             strncmp(lines[k].tag, "exec", 4) == 0);
            if (lines[k].kind == 's' && access(lines[k].path, F_OK) == 0)
                stream = lines[k].path;
        }
        if (stream != NULL && final)
            errors_line("  ", "%s  (stream, pid %ld, kept beside its final snapshot: "
                              "CUMEMTRACE_STREAM=keep)", stream, m->pid);
        else if (stream != NULL)
            errors_line("  ", "%s  (stream, pid %ld %s ended without a snapshot: read it "
                              "with cumemtrace report, or cumemtrace recover it)",
                        stream, m->pid, m->path);
        else if (!wrote)
            errors_line("cumemtrace: ", "pid %ld (%s) used CUDA but wrote no snapshot: it "
                        "ended without exiting (SIGKILL, _exit); leave CUMEMTRACE_STREAM "
                        "on to keep a record of such ends", m->pid, m->path);
    }
    for (size_t i = 0; i < n; i++)
        free(lines[i].line);
    free(lines);
}

/* A `run` inside another's command: the outer one lists what its own
 * manifest holds, and our children wrote to ours - so our records go on to
 * the outer manifest (`outer`, whose first line must carry `outer_key`, as
 * the library checks), in one O_APPEND write after the command ended. */
static void forward_manifest(const char *ours, size_t header_len, const char *outer,
                             const char *outer_key)
{
    FILE *f = fopen(ours, "r");
    if (f == NULL)
        return;
    char *body = NULL;
    size_t len = 0;
    if (fseek(f, (long)header_len, SEEK_SET) == 0) {
        FILE *m = open_memstream(&body, &len);
        char chunk[4096];
        size_t got;
        while (m != NULL && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
            fwrite(chunk, 1, got, m);
        if (m != NULL)
            fclose(m);
    }
    fclose(f);
    int fd = len > 0 ? open(outer, O_RDWR | O_APPEND | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW |
                                       O_CLOEXEC)
                     : -1;
    struct stat st;
    char want[96], got[96];
    int wn = snprintf(want, sizeof want, "cumemtrace-manifest %s\n", outer_key);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && wn > 0 &&
        (size_t)wn < sizeof want && pread(fd, got, (size_t)wn, 0) == wn &&
        memcmp(got, want, (size_t)wn) == 0) {
        ssize_t w = write(fd, body, len);
        (void)w; /* the outer listing then lacks them; ours was printed */
    }
    if (fd >= 0)
        close(fd);
    free(body);
}

/* 32 hex digits from the kernel's random source into key[33]. */
static int random_key(char *key)
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        return -1;
    for (int i = 0; i < 16; i++)
        snprintf(key + 2 * i, 3, "%02x", b[i]);
    return 0;
}

static int exit_like(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        fflush(NULL);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        return 128 + sig;
    }
    return CLI_EXIT_ERROR;
}

/* An explicit file (no %-codes, not a directory) must not exist: the
 * library would take "<file>.1" and `report <file>` read the stale one.
 * --force removes it first (a regular file or symlink only). */
static int claim_output(const char *output, bool force)
{
    struct stat st;
    size_t n = strlen(output);
    if (strchr(output, '%') != NULL || n == 0 || output[n - 1] == '/' ||
        lstat(output, &st) != 0 || (stat(output, &st) == 0 && S_ISDIR(st.st_mode)))
        return 0;
    if (!force) {
        fprintf(stderr, "cumemtrace: run: '%s' already exists (an earlier run's "
                "snapshot?); remove it, choose another --output, or add --force to "
                "replace it\n", output);
        return -1;
    }
    if (lstat(output, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
        unlink(output) == 0)
        return 0;
    fprintf(stderr, "cumemtrace: run: cannot replace '%s': %s; remove it or choose "
            "another --output\n", output,
            S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? strerror(errno)
                                                       : "not a regular file");
    return -1;
}

static const char usage[] =
    "usage: cumemtrace run [--output PATTERN [--force]] [--limit SIZE] [--depth N]\n"
    "                      [--] COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with libcumemtrace.so preloaded ($CUMEMTRACE_LIB, else the\n"
    "one next to this program or in ../lib/), waits for it, prints the snapshot files that it and its\n"
    "child processes wrote (on stderr), and exits with its status.  SIGINT,\n"
    "SIGTERM, SIGHUP and SIGQUIT sent to cumemtrace are passed on.\n"
    "\n"
    "  --output PATTERN  CUMEMTRACE_OUTPUT: a directory, or a file pattern with\n"
    "                    %p pid, %e executable, %h host, %r rank, %t time;\n"
    "                    a plain file name that exists is an error\n"
    "  --force           replace that file (an earlier run's snapshot)\n"
    "  --limit SIZE      CUMEMTRACE_LIMIT: behave as on a GPU of SIZE (24GiB)\n"
    "  --depth N         CUMEMTRACE_DEPTH: native frames per stack, "
    STR(SETTINGS_DEPTH_MIN) "-" STR(SETTINGS_DEPTH_MAX) "\n"
    "                    (0 records none)\n"
    "\n"
    "example: cumemtrace run --limit 24GiB -- python train.py --batch 64\n"
    "         cumemtrace run -- torchrun --nproc-per-node 8 train.py\n";

/* The snapshot list: a new file in $TMPDIR (path, PATH_MAX bytes) whose
 * first line, header, names a fresh key.  0, or -1 with a message. */
static int create_manifest(char *path, char key[33], char *header, size_t hn)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, PATH_MAX, "%s/cumemtrace-run.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, "cumemtrace: run: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (random_key(key) != 0) {
        fprintf(stderr, "cumemtrace: run: cannot read random bits for the snapshot list: "
                "%s\n", strerror(errno));
        goto fail;
    }
    int hl = snprintf(header, hn, "cumemtrace-manifest %s\n", key);
    if (write(fd, header, (size_t)hl) != hl) {
        fprintf(stderr, "cumemtrace: run: cannot write %s: %s\n", path, strerror(errno));
        goto fail;
    }
    close(fd);
    return 0;
fail:
    close(fd);
    unlink(path);
    return -1;
}

int run_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"limit", required_argument, NULL, 'l'},
        {"depth", required_argument, NULL, 'd'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *output = NULL, *limit = NULL, *depth = NULL;
    bool force = false;
    int c;
    /* '+': stop at the command, whose own options are not ours. */
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        uint64_t v;
        int rc;
        switch (c) {
        case 'o': output = optarg; break;
        case 'f': force = true; break;
        case 'l':
            rc = units_parse_size(optarg, &v);
            if (rc == UNITS_ENOUNIT)
                return cli_usage("run", "--limit needs a unit: %sGiB, %sMiB or %sB, "
                                 "not '%s' (docs/units.md)", optarg, optarg, optarg, optarg);
            if (rc != 0 || v == 0)
                return cli_usage("run", "--limit wants a size such as 24GiB, not '%s'",
                                 optarg);
            limit = optarg;
            break;
        case 'd':
            /* SETTINGS_DEPTH_MIN is 0: every count is at least that. */
            if (cli_parse_count(optarg, &v) != 0 || v > SETTINGS_DEPTH_MAX)
                return cli_usage("run", "--depth wants a frame count from %d to %d, "
                                 "not '%s'", SETTINGS_DEPTH_MIN, SETTINGS_DEPTH_MAX, optarg);
            depth = optarg;
            break;
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("run", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("run", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage("run", "no command given");
    if (force && output == NULL)
        return cli_usage("run", "--force replaces the file named by --output; give --output");
    if (output != NULL && claim_output(output, force) != 0)
        return CLI_EXIT_ERROR;

    char lib[PATH_MAX], looked[2 * PATH_MAX + 80];
    if (find_library(lib, sizeof lib, looked, sizeof looked) != 0) {
        struct cli_error err;
        errors_set(&err, CLI_ENOLIB, "run: %s not found; looked in %s", LIB_NAME, looked);
        errors_print(&err);
        return CLI_EXIT_ERROR;
    }

    char manifest[PATH_MAX], key[33], header[64];
    if (create_manifest(manifest, key, header, sizeof header) != 0)
        return CLI_EXIT_ERROR;

    /* an outer run's list, which our children's records must reach too */
    char *outer = getenv("CUMEMTRACE_MANIFEST") ? strdup(getenv("CUMEMTRACE_MANIFEST")) : NULL;
    char *outer_key = getenv("CUMEMTRACE_MANIFEST_KEY")
                          ? strdup(getenv("CUMEMTRACE_MANIFEST_KEY"))
                          : NULL;
    char *preload = preload_value(lib, getenv("LD_PRELOAD"));
    bool ran = false; /* the command was started */
    int status = 0;
    if (preload == NULL)
        goto done;
    int rc = set_env("LD_PRELOAD", preload) || set_env("CUMEMTRACE_MANIFEST", manifest) ||
             set_env("CUMEMTRACE_MANIFEST_KEY", key) ||
             (output && set_env("CUMEMTRACE_OUTPUT", output)) ||
             (limit && set_env("CUMEMTRACE_LIMIT", limit)) ||
             (depth && set_env("CUMEMTRACE_DEPTH", depth));
    free(preload);
    char *was = NULL;
    /* A Python that ignores PYTHONPATH (-E, -I) or skips site (-S) gets
     * none of ours: it would only show our directory; the library's own
     * hook (torch_layer.c) loads the layer there. */
    char *pypath = pyflags_skips_site(argv + optind) ? NULL : python_path(lib, &was);
    if (pypath != NULL && rc == 0)
        rc = set_env("PYTHONPATH", pypath) || set_env("CUMEMTRACE_PYTHONPATH", was);
    free(pypath);
    free(was);
    /* The program's NVTX ranges become phases (src/preload/phases/nvtx.c);
     * a tool the user chose keeps them. */
    const char *nvtx = getenv("NVTX_INJECTION64_PATH");
    if (rc == 0 && (nvtx == NULL || nvtx[0] == '\0'))
        rc = set_env("NVTX_INJECTION64_PATH", lib);
    else if (rc == 0 && strcmp(nvtx, lib) != 0)
        fprintf(stderr, "cumemtrace: run: NVTX_INJECTION64_PATH is already set to '%s': "
                        "left as it is, so the program's NVTX ranges go to that tool and "
                        "not to cumemtrace's phases (unset it to see them by range)\n", nvtx);
    if (rc != 0)
        goto done;

    sigset_t block, old_mask;
    sigemptyset(&block);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaddset(&block, forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        fprintf(stderr, "cumemtrace: run: cannot fork: %s\n", strerror(e));
        goto done;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        execvp(argv[optind], argv + optind);
        int e = errno;
        fprintf(stderr, "cumemtrace: run: cannot run '%s': %s\n", argv[optind], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    child = pid;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaction(forwarded[i], &sa, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    ran = true;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "cumemtrace: run: waiting for the command failed: %s\n",
                    strerror(errno));
            status = CLI_EXIT_ERROR << 8;
            break;
        }
    }
    child = 0;
    print_manifest(manifest, header);
    if (outer != NULL && outer[0] != '\0' && outer_key != NULL && outer_key[0] != '\0')
        forward_manifest(manifest, strlen(header), outer, outer_key);
done:
    free(outer);
    free(outer_key);
    unlink(manifest);
    return ran ? exit_like(status) : CLI_EXIT_ERROR;
}
