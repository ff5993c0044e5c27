/* fit.c - `cumemtrace fit`: does a script fit on a given card?  It runs
 * the command once per simulated card under `cumemtrace run` and prints
 * one table (docs/cli.md's `fit` section).
 *
 * fit.txt, written at interpreter exit by src/torchboot/layer/fit.py
 * when CUMEMTRACE_FIT_REPORT names it: a first line "cumemtrace-fit 1", then
 * "key value" lines - max_allocated, max_reserved, num_ooms, total (bytes,
 * PyTorch's own figures of the current device; the peaks are the run's
 * whole, kept across the script's reset_peak_memory_stats()), peak_resets
 * (how many such resets), cudnn_attention (1: compute capability 9.0 or
 * later with cuDNN attention enabled, whose workspace is not modelled), device_peak (the tracer's peak of the device:
 * all the process's CUDA memory), torch_version, oom_time (Unix seconds of
 * the first out-of-memory error), oom_where ("file:line (function)" of the
 * user's frame that raised it), oom_message.  Unknown keys are ignored.
 *
 * Limitations: a script that never imports torch has no PyTorch figures
 * (the table says so); the verdict is the simulated card's, whose fidelity
 * limits docs/simgpu.md lists.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_usage.h"
#include "fit_impl.h"
#include "units.h"

#define FIT_PROGRESS_S 30   /* a "still running" line this often */
/* A run nobody bounded ends after an hour: longer than the few steps a
 * fit needs on the simulated card, short enough that a script waiting for
 * something that never comes does not hold fit for good. */
#define FIT_DEFAULT_TIMEOUT_S 3600
#define FIT_KILL_AFTER_S 10 /* SIGKILL this long after the timeout's SIGINT */

struct preset {
    char name[32], memory[32], cc[8], reserve[32], device[96];
};


static const char usage[] =
    "usage: cumemtrace fit (--gpu NAME | --memory SIZE)... [--output DIR] [--timeout SECONDS]\n"
    "                      [--bytes] [--no-fixes] [--search NAME=LO..HI] [--nproc N]\n"
    "                      [--nccl-channels C] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND on each simulated card, under the tracer, and prints whether\n"
    "it fits: PyTorch's own max_memory_allocated and max_memory_reserved, the\n"
    "headroom left (capacity - context reserve - max reserved), or where it ran\n"
    "out of memory (the Python line, after how long) and the post-mortem file.\n"
    "\n"
    "  --gpu NAME      a card preset (h100, h200, a100-80gb, a100-40gb, l4,\n"
    "                  rtx4090, rtx3090; `scripts/simgpu --gpu list`)\n"
    "  --memory SIZE   the card `scripts/simgpu --memory SIZE` gives: SIZE,\n"
    "                  H100-like, no context reserve\n"
    "  --output DIR    where each card's files go (default cumemtrace-fit)\n"
    "  --timeout S     stop each run after S seconds (SIGINT: the script's\n"
    "                  figures so far are kept; SIGKILL 10 s later if it has\n"
    "                  not ended); default 3600, 0 for none; bound a run by\n"
    "                  its steps too\n"
    "  --bytes         exact byte counts in the table\n"
    "  --no-fixes      where it runs out of memory, do not try the allocator\n"
    "                  settings (expandable_segments:True, ...) on that card\n"
    "  --nproc N       a job of N ranks on N of each card: the command (python\n"
    "                  and its script) started by torch.distributed.run\n"
    "                  --standalone --nproc-per-node N; each rank's figures,\n"
    "                  and whether the job fits on N x the card\n"
    "  --nccl-channels C\n"
    "                  with --nproc: count NCCL's own buffers for C channels of a\n"
    "                  ring at NCCL's default sizes (9.19 MiB a channel)\n"
    "  --search NAME=LO..HI\n"
    "                  the largest integer in LO..HI that fits on each card, for\n"
    "                  the command's {NAME} (e.g. --batch-size {BATCH}): by\n"
    "                  bisection, one run a probe, the cards at once\n"
    "\n"
    "The command's stdin is /dev/null: it runs unattended, in a process group\n"
    "of its own.  Ctrl-C (SIGINT) or SIGTERM ends the current run and fit: the\n"
    "cards not run yet are not started.\n"
    "\n"
    "Exit status: 0 when it fits on every card, 1 when it ran out of memory on\n"
    "one, 2 on an error (a run that failed for another reason included), 130\n"
    "when interrupted.\n"
    "\n"
    "example: cumemtrace fit --gpu l4 --gpu a100-40gb -- python train.py --steps 3\n";

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t interrupted; /* the signal that asked fit to end, or 0 */

bool fit_interrupted(void)
{
    return interrupted != 0;
}

static void forward(int sig)
{
    interrupted = sig;
    if (child_pid > 0)
        kill(-(pid_t)child_pid, sig);
}

/* Whether a process of group pgid is stopped by job control: reading the
 * terminal from outside its foreground (SIGTTIN), or setting it (SIGTTOU).
 * Such a run would wait for good; nothing but fit can see it. */
static bool group_stopped(pid_t pgid)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return false;
    bool stopped = false;
    struct dirent *e;
    while (!stopped && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        /* pid (comm) state ppid pgrp ...: comm may hold anything, so from
         * its last ')' */
        char *r = strrchr(buf, ')');
        char state;
        int ppid, pgrp;
        if (r != NULL && sscanf(r + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
            pgrp == pgid && state == 'T')
            stopped = true;
    }
    closedir(d);
    return stopped;
}

/* This program's directory. */
static int exe_dir(char *out, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", out, n - 1);
    if (len <= 0)
        return -1;
    out[len] = '\0';
    char *slash = strrchr(out, '/');
    if (slash != NULL)
        *slash = '\0';
    return 0;
}

/* scripts/simgpu of the build tree, or the installed one. */
static int find_simgpu(const char *dir, char *out, size_t n)
{
    char cand[2][PATH_MAX + 64];
    snprintf(cand[0], sizeof cand[0], "%s/../scripts/simgpu", dir);
    snprintf(cand[1], sizeof cand[1], "%s/../lib/cumemtrace/simgpu/simgpu", dir);
    for (int i = 0; i < 2; i++)
        if (access(cand[i], X_OK) == 0 && realpath(cand[i], out) != NULL && strlen(out) < n)
            return 0;
    fprintf(stderr, "cumemtrace: fit: cannot find the simulated GPU's simgpu script (looked "
            "in %s and %s); run fit from the build tree or an installed prefix\n",
            cand[0], cand[1]);
    return -1;
}

/* The presets, read from `simgpu --gpu list`: the one table of them. */
static int load_presets(const char *simgpu, struct preset *p, int max)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "'%s' --gpu list", simgpu);
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return -1;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        struct preset q;
        int used = 0;
        char sms[16];
        if (sscanf(line, "%31s %31s %7s %15s %31s %n", q.name, q.memory, q.cc, sms, q.reserve,
                   &used) != 5 || strcmp(q.name, "NAME") == 0)
            continue;
        snprintf(q.device, sizeof q.device, "%s", line + used);
        q.device[strcspn(q.device, "\n")] = '\0';
        if (n < max)
            p[n++] = q;
    }
    return pclose(f) == 0 && n > 0 ? n : -1;
}

static const struct preset *find_preset(const struct preset *p, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(p[i].name, name) == 0)
            return &p[i];
    return NULL;
}

/* A size as the simulator reads it: with a unit, or bytes without one. */
static int show_size(const char *s, uint64_t *out)
{
    int rc = units_parse_size(s, out);
    if (rc == UNITS_ENOUNIT) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || end == s)
            return -1;
        *out = v;
        return 0;
    }
    return rc;
}

/* simgpu's options for card k: [--build DIR] [--gpu NAME] [--memory SIZE]
 * into argv after simgpu itself; the count written. */
static int simgpu_args(const char **argv, const char *simgpu, const char *build,
                       const struct fit_card *k)
{
    int a = 0;
    argv[a++] = simgpu;
    if (build != NULL) { /* the simulated GPU of this build tree */
        argv[a++] = "--build";
        argv[a++] = build;
    }
    if (k->gpu[0] != '\0') {
        argv[a++] = "--gpu";
        argv[a++] = k->gpu;
    }
    if (k->memory != NULL) {
        argv[a++] = "--memory";
        argv[a++] = k->memory;
    }
    return a;
}

/* The card simgpu gives for [--gpu NAME] [--memory SIZE]: its capacity and
 * context reserve, from `simgpu ... --show` ("MEMORY RESERVE CC SMS DEVICE"),
 * so that simgpu alone decides a card and fit's headroom is the run's. */
static int card_show(const char *simgpu, const char *build, struct fit_card *k)
{
    const char *argv[10];
    int a = simgpu_args(argv, simgpu, build, k);
    argv[a++] = "--show";
    argv[a] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        execv(simgpu, (char **)argv);
        _exit(127);
    }
    close(fds[1]);
    char line[256] = "";
    ssize_t n, got = 0;
    while (got < (ssize_t)sizeof line - 1 &&
           (n = read(fds[0], line + got, sizeof line - 1 - (size_t)got)) > 0)
        got += n;
    line[got] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    char mem[32], res[32];
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(line, "%31s %31s", mem, res) != 2)
        return -1;
    return show_size(mem, &k->capacity) == 0 && show_size(res, &k->reserve) == 0 ? 0 : -1;
}

int fit_prepare_dir(const char *dir)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent) {
        *slash = '\0';
        if (mkdir(parent, 0777) != 0 && errno != EEXIST)
            goto fail;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        goto fail;
    DIR *d = opendir(dir);
    if (d == NULL)
        goto fail;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        bool ours = strcmp(e->d_name, "output.log") == 0 || strcmp(e->d_name, "fit.txt") == 0 ||
                    strcmp(e->d_name, "simcuda-notes.txt") == 0 ||
                    (strncmp(e->d_name, "cumemtrace.", 11) == 0 && len > 5 &&
                     strcmp(e->d_name + len - 5, ".json") == 0);
        if (ours)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    return 0;
fail:
    fprintf(stderr, "cumemtrace: fit: cannot prepare '%s': %s\n", dir, strerror(errno));
    return -1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

bool fit_read_report(const char *path, struct fit_card *c, double start)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    bool ok = f != NULL && fgets(line, sizeof line, f) != NULL &&
              strncmp(line, "cumemtrace-fit 1", 16) == 0;
    while (ok && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        long long v;
        if (sscanf(line, "max_allocated %lld", &v) == 1)
            c->max_allocated = v, c->have_figures = true;
        else if (sscanf(line, "max_reserved %lld", &v) == 1)
            c->max_reserved = v;
        else if (sscanf(line, "num_ooms %lld", &v) == 1)
            c->num_ooms = v;
        else if (sscanf(line, "device_peak %lld", &v) == 1)
            c->device_peak = v;
        else if (sscanf(line, "cudnn_attention %lld", &v) == 1)
            c->cudnn_attention = v != 0;
        else if (sscanf(line, "peak_resets %lld", &v) == 1)
            c->peak_resets = v;
        else if (strncmp(line, "torch_version ", 14) == 0)
            snprintf(c->torch_version, sizeof c->torch_version, "%.63s", line + 14);
        else if (sscanf(line, "oom_time %lf", &c->oom_time) == 1)
            c->oom_time -= start;
        else if (strncmp(line, "oom_where ", 10) == 0)
            snprintf(c->oom_where, sizeof c->oom_where, "%.511s", line + 10);
    }
    if (f != NULL)
        fclose(f);
    return ok;
}

int fit_run_card(struct fit_card *c, const struct fit_job *job, int index, int count)
{
    const char *simgpu = job->simgpu, *build = job->build, *self = job->self;
    char **cmd = job->cmd;
    int ncmd = job->ncmd, timeout = job->timeout;
    bool timeout_given = job->timeout_given;
    char out[PATH_MAX + 16], report[PATH_MAX + 16], log[PATH_MAX + 16], notes[PATH_MAX + 32];
    snprintf(out, sizeof out, "%s/", c->dir);
    snprintf(notes, sizeof notes, "%s/simcuda-notes.txt", c->dir);
    snprintf(report, sizeof report, "%s/fit.txt", c->dir);
    snprintf(log, sizeof log, "%s/output.log", c->dir);
    char **argv = calloc((size_t)ncmd + 24, sizeof *argv);
    if (argv == NULL)
        return -1;
    int a = simgpu_args((const char **)argv, simgpu, build, c);
    char devices[16];
    if (job->nproc > 0) { /* one card a rank (fit_ranks.c) */
        argv[a++] = "--devices";
        argv[a++] = devices;
    }
    argv[a++] = "--";
    argv[a++] = (char *)self;
    argv[a++] = "run";
    argv[a++] = "--output";
    argv[a++] = out;
    argv[a++] = "--";
    if (job->nproc > 0)
        a += fit_ranks_command(job, devices, sizeof devices, argv + a);
    else
        for (int i = 0; i < ncmd; i++)
            argv[a++] = cmd[i];
    argv[a] = NULL;

    fprintf(stderr, "cumemtrace: fit: [%d/%d] %s: running %s (output in %s)\n", index, count,
            c->label, cmd[0], log);
    double start = now();
    pid_t pid = fork();
    if (pid < 0) {
        free(argv);
        fprintf(stderr, "cumemtrace: fit: cannot start the run: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* a group of its own, so a timeout reaches the whole job */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        /* not the terminal: outside its foreground, a read of it would
         * stop the run (SIGTTIN) */
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in >= 0)
            dup2(in, 0);
        setenv("CUMEMTRACE_FIT_REPORT", report, 1);
        setenv("SIMCUDA_NOTES", notes, 1);
        if (job->nproc > 0) /* each rank its own report (fit.py) */
            setenv("CUMEMTRACE_FIT_RANKS", "1", 1);
        else
            unsetenv("CUMEMTRACE_FIT_RANKS");
        if (job->nccl_channels > 0) { /* NCCL's buffers, as fit_ranks.c counts them */
            char nb[32];
            snprintf(nb, sizeof nb, "%lluKiB", /* a whole number of KiB: 9408 a channel */
                     (unsigned long long)(fit_ranks_nccl_bytes(job->nccl_channels) >> 10));
            setenv("SIMCUDA_NCCL_MEMORY", nb, 1);
        }
        if (c->alloc_conf[0] != '\0') { /* the setting tried, after the caller's */
            const char *was = getenv("PYTORCH_CUDA_ALLOC_CONF");
            char conf[1024];
            snprintf(conf, sizeof conf, "%s%s%s", was && was[0] ? was : "",
                     was && was[0] ? "," : "", c->alloc_conf);
            setenv("PYTORCH_CUDA_ALLOC_CONF", conf, 1);
        }
        execv(simgpu, argv);
        fprintf(stderr, "cumemtrace: fit: cannot run %s: %s\n", simgpu, strerror(errno));
        _exit(127);
    }
    free(argv);
    setpgid(pid, pid);
    child_pid = pid;
    int status = 0;
    bool sent_int = false, sent_kill = false;
    double kill_at = 0, next_note = start + FIT_PROGRESS_S, next_stop_check = start + 1;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            status = -1;
            break;
        }
        double t = now();
        if (timeout > 0 && !sent_int && t - start >= timeout) {
            /* SIGINT: Python's KeyboardInterrupt, so the PyTorch layer still
             * reports at exit; then SIGKILL if it does not end. */
            kill(-pid, SIGINT);
            sent_int = c->timed_out = true;
            kill_at = t + FIT_KILL_AFTER_S;
            fprintf(stderr, "cumemtrace: fit: [%d/%d] %s: stopping it after %d s (%s); "
                    "SIGINT\n", index, count, c->label, timeout,
                    timeout_given ? "--timeout" : "the default --timeout: give --timeout S "
                    "for another, 0 for none");
        }
        if (sent_int && !sent_kill && t >= kill_at) {
            kill(-pid, SIGKILL);
            sent_kill = true;
            fprintf(stderr, "cumemtrace: fit: [%d/%d] %s: still running %d s after SIGINT: "
                    "SIGKILL\n", index, count, c->label, FIT_KILL_AFTER_S);
        }
        if (!c->stopped && t >= next_stop_check) {
            next_stop_check = t + 1;
            if (group_stopped(pid)) {
                fprintf(stderr, "cumemtrace: fit: [%d/%d] %s: the command was stopped (a job-"
                        "control stop, as reading or setting the terminal gives: SIGTTIN, "
                        "SIGTTOU); ending it\n", index, count, c->label);
                c->stopped = true;
                kill(-pid, SIGKILL);
            }
        }
        if (t >= next_note) {
            fprintf(stderr, "cumemtrace: fit: [%d/%d] %s: still running, %.0f s\n", index,
                    count, c->label, t - start);
            next_note += FIT_PROGRESS_S;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    child_pid = 0;
    c->status = status;
    c->seconds = now() - start;

    fit_read_report(report, c, start); /* PyTorch's figures */
    if (job->nproc > 0)
        fit_ranks_read(c, report, job->nproc);
    /* the simulated card's notes: a read of memory only a kernel would
     * have written (src/simgpu/runtime/runtime_backing.c) */
    FILE *f = fopen(notes, "r");
    char line[1024];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "uncomputed_read ", 16) == 0)
            c->uncomputed = true;
    if (f != NULL)
        fclose(f);
    /* the post-mortem: the first snapshot written at an out-of-memory error */
    DIR *d = opendir(c->dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "cumemtrace.", 11) == 0 && strstr(e->d_name, ".oom") != NULL &&
            c->postmortem[0] == '\0')
            snprintf(c->postmortem, sizeof c->postmortem, "%s/%s", c->dir, e->d_name);
    if (d != NULL)
        closedir(d);
    return 0;
}

int64_t fit_peak_held(const struct fit_card *c)
{
    return c->device_peak > c->max_reserved ? c->device_peak : c->max_reserved;
}

bool fit_ran_out(const struct fit_card *c)
{
    return c->num_ooms > 0 || c->oom_where[0] != '\0';
}

/* A run that did not end well by itself (stopped at the timeout, or failed
 * without running out of memory) after reading device memory that only a
 * kernel would have written: what it did with those zeros, the simulated
 * card cannot tell from what a real card would do. */
static bool fit_undecided(const struct fit_card *c)
{
    bool ended_ok = WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
    return c->uncomputed && !fit_ran_out(c) && (c->timed_out || !ended_ok);
}

const char *fit_size_text(int64_t v, bool bytes, char *buf, size_t n)
{
    if (v < 0)
        return "-";
    if (bytes)
        snprintf(buf, n, "%lld", (long long)v);
    else
        units_format_bytes((uint64_t)v, buf, n);
    return buf;
}

/* The verdict in a word or two (a static string, the table's column), and
 * in full into buf. */
static const char *fit_verdict(const struct fit_card *c, char *buf, size_t n)
{
    int code = WIFEXITED(c->status) ? WEXITSTATUS(c->status) : 128 + WTERMSIG(c->status);
    if (fit_ran_out(c)) {
        char after[48] = "";
        if (c->oom_time > 0)
            snprintf(after, sizeof after, " after %.1f s", c->oom_time);
        snprintf(buf, n, "OOM at %s%s", c->oom_where[0] ? c->oom_where : "(no Python line)",
                 after);
        return "OOM";
    }
    if (c->stopped) {
        snprintf(buf, n, "stopped (job control; see output.log)");
        return "stopped";
    }
    if (!c->have_figures) {
        snprintf(buf, n, "no PyTorch figures (exit %d; see output.log)", code);
        return "no figures";
    }
    if (fit_undecided(c)) {
        snprintf(buf, n, "%s after %.0f s: its control flow reads values the simulated card "
                 "never computes (they read as zeros: MoE routing, masks, a loop's "
                 "stopping test), so this run says nothing of a real card",
                 c->timed_out ? "stopped" : "failed", c->seconds);
        return "undecided";
    }
    if (c->timed_out) {
        snprintf(buf, n, "fits so far (stopped after %.0f s)", c->seconds);
        return "fits so far";
    }
    if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0) {
        snprintf(buf, n, "fits");
        return "fits";
    }
    snprintf(buf, n, "failed, not OOM (exit %d; see output.log)", code);
    return "failed";
}

const char *fit_verdict_word(const struct fit_card *c)
{
    char v[600];
    return fit_verdict(c, v, sizeof v);
}

/* One row a card, under 90 columns; what does not fit in a column (where it
 * ran out of memory, the post-mortem's file) on indented lines below it. */
static void print_table(const struct fit_card *cards, int n, bool bytes)
{
    printf("%-12s %-11s %-12s %-14s %-14s %s\n", "card", "capacity", "verdict",
           "max allocated", "max reserved", "headroom");
    for (int i = 0; i < n; i++) {
        const struct fit_card *c = &cards[i];
        char cap[32], al[32], re[32], hr[32], v[600];
        const char *word = fit_verdict(c, v, sizeof v);
        int64_t headroom = -1, held = fit_peak_held(c);
        if (c->have_figures && !fit_ran_out(c) && !fit_undecided(c) &&
            c->capacity >= c->reserve + (uint64_t)held)
            headroom = (int64_t)(c->capacity - c->reserve - (uint64_t)held);
        printf("%-12s %-11s %-12s %-14s %-14s %s\n", c->label,
               fit_size_text((int64_t)c->capacity, bytes, cap, sizeof cap), word,
               fit_size_text(c->have_figures ? c->max_allocated : -1, bytes, al, sizeof al),
               fit_size_text(c->have_figures ? c->max_reserved : -1, bytes, re, sizeof re),
               fit_size_text(headroom, bytes, hr, sizeof hr));
        if (strcmp(v, word) != 0)
            printf("%-12s %s\n", "", v);
        if (c->nranks > 0)
            fit_ranks_print(c, bytes);
        if (c->postmortem[0])
            printf("%-12s post-mortem: %s\n", "", c->postmortem);
        if (c->uncomputed && !fit_undecided(c))
            printf("%-12s it read device values only a kernel would have written (zeros "
                   "here): a path they choose may differ on a card\n", "");
        if (c->have_figures && c->peak_resets > 0)
            printf("%-12s the script reset PyTorch's peaks %lld time%s: these are the "
                   "whole run's\n", "", (long long)c->peak_resets,
                   c->peak_resets == 1 ? "" : "s");
        if (c->have_figures && c->device_peak > c->max_reserved)
            printf("%-12s the process held %s of device memory at its peak, more than "
                   "PyTorch reserved (memory outside its allocator): headroom counts it\n",
                   "", fit_size_text(c->device_peak, bytes, hr, sizeof hr));
    }
    bool cudnn = false;
    for (int i = 0; i < n; i++)
        cudnn = cudnn || cards[i].cudnn_attention;
    if (cudnn)
        printf("not modelled: cuDNN attention's workspace (PyTorch picks cuDNN attention at "
               "compute\n  capability 9.0 for bf16/fp16 scaled_dot_product_attention without "
               "dropout)\n");
    /* the figures are this PyTorch's: its version is their largest source of
     * difference from another's */
    const char *said = NULL;
    for (int i = 0; i < n; i++) {
        const char *v = cards[i].torch_version;
        if (v[0] == '\0' || (said != NULL && strcmp(said, v) == 0))
            continue;
        printf("figures of PyTorch %s on the simulated card\n", v);
        said = v;
    }
}

int fit_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"gpu", required_argument, NULL, 'g'},
        {"memory", required_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, 't'},
        {"bytes", no_argument, NULL, 'b'},
        {"no-fixes", no_argument, NULL, 'n'},
        {"search", required_argument, NULL, 's'},
        {"nproc", required_argument, NULL, 'p'},
        {"nccl-channels", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *card_arg[FIT_MAX_CARDS]; /* the cards in the order given */
    bool card_mem[FIT_MAX_CARDS];         /* --memory SIZE, else --gpu NAME */
    int norder = 0;
    const char *output = "cumemtrace-fit";
    uint64_t timeout = FIT_DEFAULT_TIMEOUT_S;
    bool bytes = false, timeout_given = false, fixes = true, searching = false;
    uint64_t nproc = 0, nccl_channels = 0;
    struct fit_search search = {0};
    int c;
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case 'g':
        case 'm':
            if (norder == FIT_MAX_CARDS)
                return cli_usage("fit", "at most %d cards at once", FIT_MAX_CARDS);
            if (c == 'm' && (units_parse_size(optarg, &v) != 0 || v == 0))
                return cli_usage("fit", "--memory '%s': expected a size like 24GiB", optarg);
            card_mem[norder] = c == 'm';
            card_arg[norder++] = optarg;
            break;
        case 'o': output = optarg; break;
        case 't':
            if (cli_parse_count(optarg, &timeout) != 0 || timeout > 7 * 24 * 3600)
                return cli_usage("fit", "--timeout '%s': expected seconds", optarg);
            timeout_given = true;
            break;
        case 'b': bytes = true; break;
        case 'c':
            if (cli_parse_count(optarg, &nccl_channels) != 0 || nccl_channels < 1 ||
                nccl_channels > 64)
                return cli_usage("fit", "--nccl-channels '%s': expected NCCL's channels, "
                                 "1 to 64", optarg);
            break;
        case 'p':
            if (cli_parse_count(optarg, &nproc) != 0 || nproc < 1 || nproc > FIT_MAX_RANKS)
                return cli_usage("fit", "--nproc '%s': expected the ranks, 1 to %d",
                                 optarg, FIT_MAX_RANKS);
            break;
        case 'n': fixes = false; break;
        case 's': {
            int used = 0;
            if (sscanf(optarg, "%31[A-Za-z0-9_]=%lld..%lld%n", search.name, &search.lo,
                       &search.hi, &used) != 3 || optarg[used] != '\0' || search.lo < 0 ||
                search.hi < search.lo)
                return cli_usage("fit", "--search '%s': expected NAME=LO..HI, integers with "
                                 "0 <= LO <= HI (e.g. BATCH=1..512)", optarg);
            searching = true;
            break;
        }
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("fit", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("fit", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (norder == 0)
        return cli_usage("fit", "no card: give --gpu NAME or --memory SIZE (e.g. --gpu l4)");
    if (optind >= argc)
        return cli_usage("fit", "no command: put it after -- (e.g. -- python train.py)");
    if (nproc > 0 && !fit_ranks_startable(argv + optind, argc - optind))
        return cli_usage("fit", "--nproc: the command must be python and its script (e.g. "
                         "-- python train.py): fit starts it with torch.distributed.run");
    if (nccl_channels > 0 && nproc == 0)
        return cli_usage("fit", "--nccl-channels needs --nproc N (a job of ranks)");
    if (nproc > 0 && searching)
        return cli_usage("fit", "--nproc and --search together are not supported");
    if (searching) {
        char pat[48];
        snprintf(pat, sizeof pat, "{%s}", search.name);
        bool named = false;
        for (int i = optind; i < argc; i++)
            named = named || strstr(argv[i], pat) != NULL;
        if (!named)
            return cli_usage("fit", "--search %s: the command has no %s to replace (e.g. "
                             "-- python train.py --batch-size %s)", search.name, pat, pat);
        search.probes_max = 2;
        for (long long span = search.hi - search.lo; span > 1; span = (span + 1) / 2)
            search.probes_max++;
    }

    char dir[PATH_MAX], self[PATH_MAX + 16], simgpu[PATH_MAX];
    if (exe_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, "cumemtrace: fit: cannot find this program: /proc/self/exe is "
                "unreadable\n");
        return CLI_EXIT_ERROR;
    }
    snprintf(self, sizeof self, "%s/cumemtrace", dir);
    /* in a build tree the simulated GPU is DIR/sim (simgpu --build DIR);
     * installed, simgpu finds its own */
    char simdir[PATH_MAX + 32];
    snprintf(simdir, sizeof simdir, "%s/sim/libcuda.so.1", dir);
    const char *build = access(simdir, R_OK) == 0 ? dir : NULL;
    if (find_simgpu(dir, simgpu, sizeof simgpu) != 0)
        return CLI_EXIT_ERROR;
    /* the card's own capacity and reserve, not the caller's settings */
    unsetenv("SIMCUDA_MEMORY");
    unsetenv("SIMCUDA_RESERVED");
    struct preset presets[32];
    int npresets = load_presets(simgpu, presets, 32);
    if (npresets <= 0) {
        fprintf(stderr, "cumemtrace: fit: '%s --gpu list' printed no presets\n", simgpu);
        return CLI_EXIT_ERROR;
    }

    struct fit_card *cards = calloc((size_t)norder, sizeof *cards);
    if (cards == NULL) {
        fprintf(stderr, "cumemtrace: fit: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    int rc = 0;
    for (int i = 0; i < norder; i++) {
        struct fit_card *k = &cards[i];
        bool is_mem = card_mem[i];
        k->memory = is_mem ? card_arg[i] : NULL;
        if (!is_mem) {
            const struct preset *p = find_preset(presets, npresets, card_arg[i]);
            if (p == NULL) {
                fprintf(stderr, "cumemtrace: fit: unknown --gpu '%s'; the presets:",
                        card_arg[i]);
                for (int j = 0; j < npresets; j++)
                    fprintf(stderr, " %s", presets[j].name);
                fprintf(stderr, "\n");
                rc = CLI_EXIT_ERROR;
                goto done;
            }
            snprintf(k->gpu, sizeof k->gpu, "%.31s", p->name);
        }
        snprintf(k->label, sizeof k->label, "%.47s", is_mem ? k->memory : k->gpu);
        if (card_show(simgpu, build, k) != 0) {
            fprintf(stderr, "cumemtrace: fit: '%s --show' did not describe the card %s "
                    "(is the simulated GPU installed?)\n", simgpu, k->label);
            rc = CLI_EXIT_ERROR;
            goto done;
        }
        int w = snprintf(k->dir, sizeof k->dir, "%s/%s", output, k->label);
        if (w < 0 || (size_t)w >= sizeof k->dir) {
            fprintf(stderr, "cumemtrace: fit: --output '%s' is too long\n", output);
            rc = CLI_EXIT_ERROR;
            goto done;
        }
        k->max_allocated = k->max_reserved = k->device_peak = -1;
    }

    struct sigaction sa = {0};
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct fit_job job = {simgpu, build, self, argv + optind, argc - optind, (int)timeout,
                          timeout_given, (int)nproc, (int)nccl_channels};
    if (searching) {
        rc = fit_search_run(cards, norder, &job, &search, bytes);
        rc = rc < 0 ? CLI_EXIT_ERROR : rc;
        goto finish;
    }
    int ran = norder; /* the cards run: fewer when interrupted */
    for (int i = 0; i < norder && !interrupted; i++) {
        if (fit_prepare_dir(cards[i].dir) != 0 ||
            fit_run_card(&cards[i], &job, i + 1, norder) != 0) {
            rc = CLI_EXIT_ERROR;
            goto done;
        }
        char v[600];
        fit_verdict(&cards[i], v, sizeof v);
        fprintf(stderr, "cumemtrace: fit: [%d/%d] %s: %s (%.1f s)\n", i + 1, norder,
                cards[i].label, v, cards[i].seconds);
        if (interrupted && i + 1 < norder) {
            fprintf(stderr, "cumemtrace: fit: interrupted:");
            for (int j = i + 1; j < norder; j++)
                fprintf(stderr, "%s %s", j > i + 1 ? "," : "", cards[j].label);
            fprintf(stderr, " not run\n");
        }
        if (interrupted) {
            ran = i + 1;
            break;
        }
    }
    print_table(cards, ran, bytes);
    if (nproc > 0)
        fit_ranks_summary(cards, ran, &job);
    fflush(stdout);
    for (int i = 0; i < ran && fixes && !interrupted; i++)
        if (fit_ran_out(&cards[i]) && fit_fixes_try(&cards[i], &job, bytes) != 0)
            rc = CLI_EXIT_ERROR;
    for (int i = 0; i < ran; i++) {
        if (fit_ran_out(&cards[i]))
            rc = rc == 0 ? 1 : rc;
        else if (!cards[i].have_figures || fit_undecided(&cards[i]) ||
                 (!cards[i].timed_out &&
                  !(WIFEXITED(cards[i].status) && WEXITSTATUS(cards[i].status) == 0)))
            rc = CLI_EXIT_ERROR;
    }
finish:
    if (cli_finish_stdout() != 0)
        rc = CLI_EXIT_ERROR;
    if (interrupted)
        rc = 128 + interrupted;
done:
    free(cards);
    return rc;
}
