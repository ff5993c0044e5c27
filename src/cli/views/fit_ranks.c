/* fit_ranks.c - `cumemtrace fit --nproc N`: a job of N ranks, one process a
 * simulated card, as torchrun starts them on one node; docs/cli.md's `fit`
 * section says how they run and what NCCL's buffers count.
 *
 * Each rank's PyTorch layer writes its own report, fit.txt.rankR
 * (src/torchboot/layer/fit.py; fit sets CUMEMTRACE_FIT_RANKS=1 for it): the
 * launcher never uses CUDA, so fit.txt has no figures.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fit_impl.h"

bool fit_ranks_startable(char **cmd, int ncmd)
{
    if (ncmd < 2)
        return false;
    const char *base = strrchr(cmd[0], '/');
    base = base != NULL ? base + 1 : cmd[0];
    return strncmp(base, "python", 6) == 0;
}

int fit_ranks_command(const struct fit_job *job, char *dev, size_t n, char **out)
{
    static char nper[16];
    snprintf(dev, n, "%d", job->nproc);
    snprintf(nper, sizeof nper, "%d", job->nproc);
    int a = 0;
    out[a++] = job->cmd[0];
    out[a++] = "-m";
    out[a++] = "torch.distributed.run";
    out[a++] = "--standalone"; /* a rendezvous on a free port of this host */
    out[a++] = "--nproc-per-node";
    out[a++] = nper;
    for (int i = 1; i < job->ncmd; i++)
        out[a++] = job->cmd[i];
    return a;
}

#define NCCL_SIMPLE_BYTES (UINT64_C(1) << 22)
#define NCCL_LL_BYTES (UINT64_C(8) * 512 * 8 * 16)
#define NCCL_LL128_BYTES (UINT64_C(120) * 640 * 8 * 8)

uint64_t fit_ranks_nccl_bytes(int nccl_channels)
{
    return (uint64_t)nccl_channels * (NCCL_SIMPLE_BYTES + NCCL_LL_BYTES + NCCL_LL128_BYTES);
}

void fit_ranks_read(struct fit_card *c, const char *report, int nproc)
{
    c->nranks = nproc;
    struct fit_card *t = malloc(sizeof *t);
    for (int r = 0; r < nproc; r++) {
        c->rank_allocated[r] = c->rank_reserved[r] = -1;
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s.rank%d", report, r);
        if (t == NULL)
            continue;
        memset(t, 0, sizeof *t);
        t->max_allocated = t->max_reserved = t->device_peak = -1;
        if (!fit_read_report(path, t, 0))
            continue;
        c->rank_allocated[r] = t->max_allocated;
        c->rank_reserved[r] = t->max_reserved;
        c->have_figures = c->have_figures || t->have_figures;
        c->max_allocated = t->max_allocated > c->max_allocated ? t->max_allocated
                                                               : c->max_allocated;
        c->max_reserved = t->max_reserved > c->max_reserved ? t->max_reserved : c->max_reserved;
        c->device_peak = t->device_peak > c->device_peak ? t->device_peak : c->device_peak;
        c->num_ooms += t->num_ooms;
        c->peak_resets += t->peak_resets;
        c->cudnn_attention = c->cudnn_attention || t->cudnn_attention;
        if (t->torch_version[0] != '\0')
            snprintf(c->torch_version, sizeof c->torch_version, "%s", t->torch_version);
        if (t->oom_where[0] != '\0' && c->oom_where[0] == '\0')
            snprintf(c->oom_where, sizeof c->oom_where, "rank %d: %.490s", r, t->oom_where);
    }
    free(t);
}

void fit_ranks_print(const struct fit_card *c, bool bytes)
{
    for (int r = 0; r < c->nranks; r++) {
        char al[32], re[32];
        if (c->rank_allocated[r] < 0) {
            printf("%-12s rank %-3d no figures (it never used CUDA, or ended before it "
                   "reported; see output.log)\n", "", r);
            continue;
        }
        printf("%-12s rank %-3d max allocated %-12s max reserved %s\n", "", r,
               fit_size_text(c->rank_allocated[r], bytes, al, sizeof al),
               fit_size_text(c->rank_reserved[r], bytes, re, sizeof re));
    }
}

void fit_ranks_summary(const struct fit_card *cards, int n, const struct fit_job *job)
{
    int nproc = job->nproc;
    for (int i = 0; i < n; i++) {
        const struct fit_card *c = &cards[i];
        bool all = c->have_figures;
        for (int r = 0; r < c->nranks; r++)
            all = all && c->rank_allocated[r] >= 0;
        const char *word = fit_verdict_word(c);
        if (strcmp(word, "fits") == 0 && all)
            printf("the job fits on %d x %s\n", nproc, c->label);
        else if (strcmp(word, "OOM") == 0)
            printf("the job does not fit on %d x %s\n", nproc, c->label);
        else
            printf("the job's verdict on %d x %s: %s\n", nproc, c->label,
                   all ? word : "not every rank reported");
    }
    if (job->nccl_channels > 0) {
        char b[32];
        printf("NCCL's own buffers: %s a communicator (--nccl-channels %d: a ring's receive "
               "buffers at NCCL's default sizes), in each rank's device memory and its "
               "headroom, not in PyTorch's figures\n",
               fit_size_text((int64_t)fit_ranks_nccl_bytes(job->nccl_channels), false, b,
                             sizeof b), job->nccl_channels);
    } else {
        printf("NCCL's own buffers: SIMCUDA_NCCL_MEMORY bytes a communicator (%s), counted "
               "in each rank's device memory, not in PyTorch's figures; --nccl-channels C "
               "counts NCCL's default buffers\n",
               getenv("SIMCUDA_NCCL_MEMORY") != NULL ? getenv("SIMCUDA_NCCL_MEMORY")
                                                      : "unset: 0, not counted");
    }
}
