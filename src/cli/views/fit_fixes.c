/* fit_fixes.c - where a card ran out of memory, the allocator settings that
 * need no change to the script, each one more run on that card
 * (docs/cli.md's `fit` section).  CARD/fixes.txt keeps the outcomes for the
 * post-mortem's advice (src/cli/text/advice_verified.c), which marks what was
 * verified and only that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fit_impl.h"

/* The settings, in the order tried.  expandable_segments returns the pages
 * of free blocks and maps new ones at a segment's end; the threshold makes
 * the allocator give back cached blocks before it asks for more, at 60 % of
 * the card (the example of PyTorch's notes); max_split_size_mb keeps blocks
 * above 128 MiB whole so that large requests find them unsplit (a size
 * between the 20 MiB large-segment unit and the blocks a training step
 * holds). */
static const char *const settings[] = {
    "expandable_segments:True",
    "garbage_collection_threshold:0.6",
    "max_split_size_mb:128",
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

/* Whether the caller's PYTORCH_CUDA_ALLOC_CONF already sets setting's key. */
static bool already_set(const char *setting)
{
    const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    size_t key = strcspn(setting, ":");
    for (const char *p = conf; p != NULL && *p != '\0';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (strncmp(p, setting, key) == 0 && (p[key] == ':' || p[key] == ' '))
            return true;
        p = strchr(p, ',');
    }
    return false;
}

int fit_fixes_try(const struct fit_card *c, const struct fit_job *job, bool bytes)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/fixes.txt", c->dir);
    FILE *out = fopen(path, "w");
    if (out == NULL) {
        fprintf(stderr, "cumemtrace: fit: cannot write '%s': %m\n", path);
        return -1;
    }
    fprintf(out, "cumemtrace-fixes 1\n");
    printf("\nfixes tried on %s (PYTORCH_CUDA_ALLOC_CONF, the script unchanged):\n",
           c->label);
    printf("  %-34s %-12s %-14s %s\n", "setting", "verdict", "max allocated", "max reserved");
    fflush(stdout);
    int rc = 0;
    for (size_t i = 0; i < NSETTINGS && !fit_interrupted(); i++) {
        if (already_set(settings[i])) {
            printf("  %-34s already in your PYTORCH_CUDA_ALLOC_CONF\n", settings[i]);
            continue;
        }
        struct fit_card *t = calloc(1, sizeof *t);
        if (t == NULL) {
            rc = -1;
            break;
        }
        *t = *c;
        /* the outcome is this run's alone */
        t->status = 0;
        t->timed_out = t->stopped = t->have_figures = t->uncomputed = false;
        t->max_allocated = t->max_reserved = t->device_peak = -1;
        t->num_ooms = t->peak_resets = 0;
        t->oom_time = 0;
        t->oom_where[0] = t->postmortem[0] = t->torch_version[0] = '\0';
        snprintf(t->alloc_conf, sizeof t->alloc_conf, "%s", settings[i]);
        int w = snprintf(t->dir, sizeof t->dir, "%.4080s/fix-%zu", c->dir, i + 1);
        snprintf(t->label, sizeof t->label, "%.20s +%.25s", c->label, settings[i]);
        if (w < 0 || (size_t)w >= sizeof t->dir || fit_prepare_dir(t->dir) != 0 || fit_run_card(t, job, (int)i + 1, NSETTINGS) != 0) {
            free(t);
            rc = -1;
            break;
        }
        const char *word = fit_verdict_word(t);
        char al[32], re[32];
        printf("  %-34s %-12s %-14s %s\n", settings[i], word,
               fit_size_text(t->have_figures ? t->max_allocated : -1, bytes, al, sizeof al),
               fit_size_text(t->have_figures ? t->max_reserved : -1, bytes, re, sizeof re));
        fflush(stdout);
        /* "fits" only for a run that ended by itself and fitted */
        bool fits = strcmp(word, "fits") == 0;
        fprintf(out, "%s %s %lld %lld\n", settings[i], fits ? "fits" : fit_ran_out(t) ? "oom"
                                                                                  : "other",
                (long long)t->max_allocated, (long long)t->max_reserved);
        free(t);
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "cumemtrace: fit: cannot write '%s': %m\n", path);
        rc = -1;
    }
    return rc;
}
