/* fit_impl.h - `cumemtrace fit`'s parts: one run of the command on one simulated
 * card (fit.c), the allocator settings tried where it ran out of memory
 * (fit_fixes.c), the largest value of an argument that fits (fit_search.c).  A card's outcome is read from the PyTorch layer's report
 * (fit.c's top comment has its format).
 */
#ifndef CUMEMTRACE_CLI_FIT_IMPL_H
#define CUMEMTRACE_CLI_FIT_IMPL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FIT_MAX_CARDS 16 /* more cards than anyone compares at once */
#define FIT_MAX_RANKS 64 /* ranks of one job on one node's simulated cards */

/* What every run of one fit shares: the simulated GPU's script, the build
 * tree (or NULL: installed), this program, the command, the timeout. */
struct fit_job {
    const char *simgpu, *build, *self;
    char **cmd;
    int ncmd;
    int timeout;         /* seconds, 0 for none */
    bool timeout_given;  /* --timeout given (else the default) */
    int nproc;           /* --nproc N: ranks started by torchrun, one a card; 0: one process */
    int nccl_channels;   /* --nccl-channels C: NCCL's buffers counted for C channels; 0: not */
};

struct fit_card {
    char label[48];          /* the directory and the table's first column */
    char gpu[32];            /* the preset passed to simgpu */
    const char *memory;      /* --memory SIZE, or NULL: the preset's */
    uint64_t capacity, reserve;
    char dir[PATH_MAX];
    /* the outcome */
    int status;              /* wait status */
    bool timed_out;
    bool stopped;            /* stopped by the terminal, then killed */
    double seconds;
    bool have_figures;
    int64_t max_allocated, max_reserved, num_ooms;
    int64_t device_peak;     /* the tracer's peak of the device, or -1 */
    int64_t peak_resets;     /* reset_peak_memory_stats() calls of the script */
    char torch_version[64];
    bool uncomputed;         /* it read device memory no copy wrote (simcuda's notes) */
    bool cudnn_attention;    /* PyTorch could pick cuDNN attention on this card */
    double oom_time;
    char oom_where[512];
    char postmortem[PATH_MAX + 256];
    char alloc_conf[64];     /* a setting tried (fit_fixes.c), added to the
                                caller's PYTORCH_CUDA_ALLOC_CONF; "" none */
    /* a job of ranks (fit_ranks.c): each rank's own figures, -1 where a
     * rank wrote none; the card's figures above are the largest rank's */
    int nranks;
    int64_t rank_allocated[FIT_MAX_RANKS], rank_reserved[FIT_MAX_RANKS];
};

/* Runs c's command on its card (c->dir prepared): simgpu [--gpu G] [--memory
 * M] -- <self> run --output DIR/ -- cmd; fills c's outcome; 0, or -1 when the
 * run could not start (said on stderr).  index/count number the progress
 * lines. */
int fit_run_card(struct fit_card *c, const struct fit_job *job, int index, int count);

/* Reads a report of the PyTorch layer at path (fit.c's top comment has its
 * format) into c, oom_time as seconds after start; false when there is none
 * (no file, or another first line). */
bool fit_read_report(const char *path, struct fit_card *c, double start);

/* mkdir -p of dir (at most two new levels) and removes what an earlier fit
 * left in it (its snapshots, output.log, fit.txt); 0, or -1 said on stderr. */
int fit_prepare_dir(const char *dir);

/* Whether Ctrl-C or SIGTERM asked fit to end: run nothing more. */
bool fit_interrupted(void);

bool fit_ran_out(const struct fit_card *c);
/* The most the run held: PyTorch's max reserved, or the tracer's device peak
 * where that is more (memory outside PyTorch's allocator). */
int64_t fit_peak_held(const struct fit_card *c);
const char *fit_verdict_word(const struct fit_card *c);
/* v bytes exactly (bytes) or in units, "-" for v < 0; returns buf. */
const char *fit_size_text(int64_t v, bool bytes, char *buf, size_t n);

/* Where c ran out of memory: reruns the command on c's card with each
 * allocator setting PyTorch documents that needs no change to the script,
 * prints which fit, and writes c->dir/fixes.txt ("cumemtrace-fixes 1", then
 * "SETTING VERDICT MAX_ALLOCATED MAX_RESERVED" a line) for the post-mortem's
 * advice.  Returns 0, or -1 when a run could not start. */
int fit_fixes_try(const struct fit_card *c, const struct fit_job *job, bool bytes);

/* --search NAME=LO..HI: the argument {NAME} of the command, its bounds. */
struct fit_search {
    char name[32];
    long long lo, hi;   /* 0 <= lo <= hi */
    int probes_max;     /* runs a card's bisection takes at most */
};

/* The largest value of sr's argument that fits on each card (prepared),
 * by bisection, the cards searched at once in processes of their own; prints
 * the table.  Returns 0 when every card has one, 1 when some card fits not
 * even LO, 2 when a search stopped on a run that neither fitted nor ran out
 * of memory, -1 on an error (said). */
int fit_search_run(const struct fit_card *cards, int n, const struct fit_job *job,
                   const struct fit_search *sr, bool bytes);

/* --nproc (fit_ranks.c).  The simgpu options and the command for a job of
 * job->nproc ranks: "--devices N" into dev (n bytes), and the command with
 * "-m torch.distributed.run --standalone --nproc-per-node N" after its
 * python into out (room for ncmd + 6 entries); returns the entries in out. */
int fit_ranks_command(const struct fit_job *job, char *dev, size_t n, char **out);
/* Whether cmd can be started as ranks: its first word is a python. */
bool fit_ranks_startable(char **cmd, int ncmd);
/* Reads each rank's report (REPORT.rankR, written by the PyTorch layer of
 * the process whose RANK is R) into c: its figures per rank, and the card's
 * as the largest rank's (the OOM: the first rank's that had one). */
void fit_ranks_read(struct fit_card *c, const char *report, int nproc);
/* NCCL's own device memory a communicator for nccl_channels channels
 * (fit_ranks.c says what it counts), for SIMCUDA_NCCL_MEMORY. */
uint64_t fit_ranks_nccl_bytes(int nccl_channels);
/* The lines under a card's row: each rank's figures. */
void fit_ranks_print(const struct fit_card *c, bool bytes);
/* The job's verdict under the table: "fits on N x CARD" and the cards it
 * does not fit on. */
void fit_ranks_summary(const struct fit_card *cards, int n, const struct fit_job *job);

#endif
