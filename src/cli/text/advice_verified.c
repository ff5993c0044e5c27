/* advice_verified.c - beside a post-mortem's advice, what `cumemtrace fit`
 * verified on the simulated card.
 *
 * fit writes fixes.txt in the directory of a card's post-mortem: a first
 * line "cumemtrace-fixes 1", then "SETTING OUTCOME MAX_ALLOCATED
 * MAX_RESERVED" a line (src/cli/views/fit_fixes.c), OUTCOME "fits", "oom" or
 * "other" for the run of the same command on the same card with
 * PYTORCH_CUDA_ALLOC_CONF=SETTING added.  A line of advice that names a
 * setting tried (by its key) says what the try gave, and loses what it said
 * was not verified or not known of one that fitted; a setting that fitted and that no
 * line names gets a line of its own, first.  Nothing else is called
 * verified.
 *
 * Limitations: the file is trusted to belong to the post-mortem beside it
 * (fit writes both in the card's directory); a missing or foreign file
 * (another first line) adds nothing.
 */
#include "advice.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

#define VERIFIED_MAX 8 /* fit tries three settings */

struct tried {
    char setting[64];
    char outcome[16];
    long long allocated, reserved;
};

/* fixes.txt beside s->file: how many settings were read into t. */
static int read_fixes(const struct snapshot *s, struct tried *t)
{
    if (s->file == NULL)
        return 0;
    char path[PATH_MAX];
    const char *slash = strrchr(s->file, '/');
    int w = slash == NULL ? snprintf(path, sizeof path, "fixes.txt")
                          : snprintf(path, sizeof path, "%.*s/fixes.txt",
                                     (int)(slash - s->file), s->file);
    if (w < 0 || (size_t)w >= sizeof path)
        return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[256];
    int n = 0;
    if (fgets(line, sizeof line, f) != NULL && strcmp(line, "cumemtrace-fixes 1\n") == 0)
        while (n < VERIFIED_MAX && fgets(line, sizeof line, f) != NULL)
            if (sscanf(line, "%63s %15s %lld %lld", t[n].setting, t[n].outcome,
                       &t[n].allocated, &t[n].reserved) == 4)
                n++;
    fclose(f);
    return n;
}

static void figures(const struct tried *t, char *buf, size_t n)
{
    char al[32], re[32];
    units_format_bytes(t->allocated < 0 ? 0 : (uint64_t)t->allocated, al, sizeof al);
    units_format_bytes(t->reserved < 0 ? 0 : (uint64_t)t->reserved, re, sizeof re);
    snprintf(buf, n, "max allocated %s, max reserved %s", al, re);
}

/* Removes the first `what` from text, if there, putting `with` in its place. */
static void replace(char *text, size_t size, const char *what, const char *with)
{
    char *at = strstr(text, what);
    size_t wl = strlen(what), nl = strlen(with), len = strlen(text);
    if (at == NULL || len - wl + nl >= size)
        return;
    memmove(at + nl, at + wl, len - (size_t)(at - text) - wl + 1);
    memcpy(at, with, nl);
}

/* " Verified on the simulated card ..." after a line naming t's setting;
 * what the line said was unverified or unknown of it no longer is. */
static void mark(struct advice *a, const struct tried *t)
{
    if (strcmp(t->outcome, "fits") == 0) {
        replace(a->text, sizeof a->text, " (not verified by a run with it)", "");
        replace(a->text, sizeof a->text, "its effect here is not known",
                "its effect is not known from the layout alone");
    }
    char fig[96], add[512];
    figures(t, fig, sizeof fig);
    if (strcmp(t->outcome, "fits") == 0)
        snprintf(add, sizeof add, " Verified on the simulated card (cumemtrace fit): with "
                 "PYTORCH_CUDA_ALLOC_CONF=%.63s the run fits (%s).", t->setting, fig);
    else
        snprintf(add, sizeof add, " Tried on the simulated card (cumemtrace fit): with "
                 "PYTORCH_CUDA_ALLOC_CONF=%.63s the run %s.", t->setting,
                 strcmp(t->outcome, "oom") == 0 ? "still ran out of memory"
                                                : "failed for another reason");
    size_t len = strlen(a->text);
    bool stop = len > 0 && a->text[len - 1] == '.';
    snprintf(a->text + len, sizeof a->text - len, "%s%s", stop ? "" : ".", add);
}

void advice_verified(const struct snapshot *s, struct advice *out, int *n)
{
    struct tried t[VERIFIED_MAX];
    int nt = read_fixes(s, t);
    for (int i = 0; i < nt; i++) {
        /* a line names a setting by its key: max_split_size_mb */
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(t[i].setting, ":"), t[i].setting);
        bool named = false;
        for (int j = 0; j < *n; j++)
            if (strstr(out[j].text, key) != NULL) {
                mark(&out[j], &t[i]);
                named = true;
            }
        if (named || strcmp(t[i].outcome, "fits") != 0 || *n >= ADVICE_MAX)
            continue;
        /* a fix that works goes first: shift the others down */
        memmove(&out[1], &out[0], (size_t)*n * sizeof *out);
        (*n)++;
        char fig[96];
        figures(&t[i], fig, sizeof fig);
        out[0].id = "verified-fix";
        out[0].bytes = 0;
        out[0].order = -1;
        snprintf(out[0].text, sizeof out[0].text, "Verified on the simulated card (cumemtrace "
                 "fit): set PYTORCH_CUDA_ALLOC_CONF=%.63s and the same script fits (%s), with no "
                 "change to it.", t[i].setting, fig);
    }
}
