/* fit_search.c - `cumemtrace fit --search NAME=LO..HI`: the largest value of
 * one argument of the script that fits on each card, by bisection, the cards
 * at once (docs/cli.md's `fit` section).
 *
 * Each card's process writes CARD/search.txt ("cumemtrace-search 1", then
 * "key value" lines: largest (or -1), max_allocated, max_reserved, held,
 * probes, stopped (the value whose probe ended the search otherwise, or
 * -1)), which the parent reads for the table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fit_impl.h"

struct found {
    long long largest;   /* -1: none fitted */
    long long stopped;   /* the value whose probe ended the search otherwise, or -1 */
    int64_t allocated, reserved, held;
    int probes;
};

static void free_cmd(char **cmd, int n)
{
    for (int i = 0; i < n; i++)
        free(cmd[i]);
    free(cmd);
}

/* The command with every {NAME} replaced by value; NULL out of memory. */
static char **substitute(const struct fit_job *job, const char *name, long long value)
{
    char pat[48], num[32];
    snprintf(pat, sizeof pat, "{%s}", name);
    snprintf(num, sizeof num, "%lld", value);
    size_t pl = strlen(pat);
    char **cmd = calloc((size_t)job->ncmd + 1, sizeof *cmd);
    if (cmd == NULL)
        return NULL;
    for (int i = 0; i < job->ncmd; i++) {
        const char *s = job->cmd[i];
        size_t len;
        FILE *m = open_memstream(&cmd[i], &len);
        if (m != NULL) {
            for (const char *p; (p = strstr(s, pat)) != NULL; s = p + pl)
                fprintf(m, "%.*s%s", (int)(p - s), s, num);
            fputs(s, m);
        }
        if (m == NULL || fclose(m) != 0) {
            free_cmd(cmd, i + 1);
            return NULL;
        }
    }
    return cmd;
}

enum outcome { PROBE_FITS, PROBE_OOM, PROBE_OTHER, PROBE_ERROR };

/* One run of the command at value on c's card; its figures into *t. */
static enum outcome probe(const struct fit_card *c, const struct fit_job *job,
                          const struct fit_search *sr, long long value, int number,
                          struct fit_card *t)
{
    *t = *c;
    t->status = 0;
    t->timed_out = t->stopped = t->have_figures = t->uncomputed = false;
    t->max_allocated = t->max_reserved = t->device_peak = -1;
    t->num_ooms = t->peak_resets = 0;
    t->oom_where[0] = t->postmortem[0] = t->torch_version[0] = '\0';
    int w = snprintf(t->dir, sizeof t->dir, "%.4000s/search-%lld", c->dir, value);
    snprintf(t->label, sizeof t->label, "%.16s %.8s=%lld", c->label, sr->name, value);
    struct fit_job j = *job;
    j.cmd = substitute(job, sr->name, value);
    if (j.cmd == NULL || w < 0 || (size_t)w >= sizeof t->dir || fit_prepare_dir(t->dir) != 0 ||
        fit_run_card(t, &j, number, sr->probes_max) != 0) {
        if (j.cmd != NULL)
            free_cmd(j.cmd, j.ncmd);
        return PROBE_ERROR;
    }
    free_cmd(j.cmd, j.ncmd);
    const char *word = fit_verdict_word(t);
    enum outcome o = strcmp(word, "fits") == 0 ? PROBE_FITS
                     : fit_ran_out(t)          ? PROBE_OOM
                                               : PROBE_OTHER;
    fprintf(stderr, "cumemtrace: fit: %s: %s=%lld %s\n", c->label, sr->name, value,
            o == PROBE_FITS ? "fits" : o == PROBE_OOM ? "runs out of memory" : word);
    return o;
}

/* A card's search, in its own process: the bisection. */
static int search_card(const struct fit_card *c, const struct fit_job *job,
                       const struct fit_search *sr, struct found *f)
{
    struct fit_card *t = malloc(sizeof *t);
    if (t == NULL)
        return -1;
    f->largest = f->stopped = -1;
    f->allocated = f->reserved = f->held = -1;
    f->probes = 0;
    long long good = -1, bad = -1;
    long long next = sr->lo;
    while (next >= 0 && !fit_interrupted()) {
        enum outcome o = probe(c, job, sr, next, ++f->probes, t);
        if (o == PROBE_ERROR) {
            free(t);
            return -1;
        }
        if (o == PROBE_OTHER) {
            f->stopped = next;
            break;
        }
        if (o == PROBE_FITS) {
            good = next;
            f->largest = next;
            f->allocated = t->max_allocated;
            f->reserved = t->max_reserved;
            f->held = fit_peak_held(t);
        } else {
            bad = next;
        }
        if (good < 0) /* LO does not fit: nothing does */
            break;
        if (bad < 0 && good < sr->hi)
            next = sr->hi;
        else if (bad >= 0 && bad - good > 1)
            next = good + (bad - good) / 2;
        else
            next = -1;
    }
    free(t);
    return 0;
}

static int write_found(const struct fit_card *c, const struct found *f)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/search.txt", c->dir);
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return -1;
    fprintf(out, "cumemtrace-search 1\nlargest %lld\nstopped %lld\nmax_allocated %lld\n"
            "max_reserved %lld\nheld %lld\nprobes %d\n", f->largest, f->stopped,
            (long long)f->allocated, (long long)f->reserved, (long long)f->held, f->probes);
    return fclose(out) == 0 ? 0 : -1;
}

static int read_found(const struct fit_card *c, struct found *f)
{
    char path[PATH_MAX + 16], line[128];
    snprintf(path, sizeof path, "%s/search.txt", c->dir);
    FILE *in = fopen(path, "r");
    if (in == NULL)
        return -1;
    int got = 0;
    long long v;
    if (fgets(line, sizeof line, in) != NULL && strcmp(line, "cumemtrace-search 1\n") == 0)
        while (fgets(line, sizeof line, in) != NULL) {
            if (sscanf(line, "largest %lld", &v) == 1)
                f->largest = v, got |= 1;
            else if (sscanf(line, "stopped %lld", &v) == 1)
                f->stopped = v, got |= 2;
            else if (sscanf(line, "max_allocated %lld", &v) == 1)
                f->allocated = v;
            else if (sscanf(line, "max_reserved %lld", &v) == 1)
                f->reserved = v;
            else if (sscanf(line, "held %lld", &v) == 1)
                f->held = v;
            else if (sscanf(line, "probes %lld", &v) == 1)
                f->probes = (int)v;
        }
    fclose(in);
    return got == 3 ? 0 : -1;
}

/* As many searches at once as there are processors. */
static long parallel(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n;
}

int fit_search_run(const struct fit_card *cards, int n, const struct fit_job *job,
                   const struct fit_search *sr, bool bytes)
{
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (pids == NULL)
        return -1;
    long running = 0, limit = parallel();
    int rc = 0;
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        while (running >= limit) {
            int st;
            if (wait(&st) > 0)
                running--;
            else if (errno != EINTR)
                break;
        }
        if (fit_interrupted())
            break;
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "cumemtrace: fit: cannot start the search on %s: %m\n",
                    cards[i].label);
            rc = -1;
            break;
        }
        if (pid == 0) {
            struct found f;
            int ok = fit_prepare_dir(cards[i].dir) == 0 &&
                     search_card(&cards[i], job, sr, &f) == 0 && write_found(&cards[i], &f) == 0;
            fflush(NULL);
            _exit(ok ? 0 : 2);
        }
        pids[i] = pid;
        running++;
    }
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
                ;
    char head[48];
    snprintf(head, sizeof head, "largest %.30s", sr->name);
    printf("%-12s %-11s %-20s %-14s %-14s %-11s %s\n", "card", "capacity", head,
           "max allocated", "max reserved", "headroom", "runs");
    for (int i = 0; i < n; i++) {
        const struct fit_card *c = &cards[i];
        struct found f = {-1, -1, -1, -1, -1, 0};
        char cap[32], al[32], re[32], hr[32], v[48];
        bool have = pids[i] > 0 && read_found(c, &f) == 0;
        if (!have)
            snprintf(v, sizeof v, "no result");
        else if (f.largest < 0)
            snprintf(v, sizeof v, "none (%lld: OOM)", sr->lo);
        else
            snprintf(v, sizeof v, "%lld%s", f.largest,
                     f.largest == sr->hi ? " (the bound)" : "");
        int64_t headroom = -1;
        if (have && f.largest >= 0 && c->capacity >= c->reserve + (uint64_t)f.held)
            headroom = (int64_t)(c->capacity - c->reserve - (uint64_t)f.held);
        printf("%-12s %-11s %-20s %-14s %-14s %-11s %d\n", c->label,
               fit_size_text((int64_t)c->capacity, bytes, cap, sizeof cap), v,
               fit_size_text(have ? f.allocated : -1, bytes, al, sizeof al),
               fit_size_text(have ? f.reserved : -1, bytes, re, sizeof re),
               fit_size_text(headroom, bytes, hr, sizeof hr), have ? f.probes : 0);
        if (have && f.stopped >= 0)
            printf("%-12s %s=%lld neither fitted nor ran out of memory (see %s/search-%lld/"
                   "output.log): the search stopped there\n", "", sr->name, f.stopped,
                   c->dir, f.stopped);
        if (!have || f.stopped >= 0)
            rc = rc < 0 ? rc : 2;
        else if (f.largest < 0 && rc == 0)
            rc = 1;
    }
    printf("figures of the largest value's run; %s=N fits where N+1 ran out of memory "
           "(or N is the bound)\n", sr->name);
    free(pids);
    return rc;
}
