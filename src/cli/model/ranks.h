/* ranks.h - many processes (ranks) of one job as one view: the streaming
 * merge behind `cumemtrace report DIR` and `cumemtrace diff DIR_A DIR_B`.
 *
 * Files are read one at a time, each into a context of its own that is
 * freed before the next: what stays is a small row per rank and one
 * aggregate per distinct call site (matched across files by name,
 * frames_site_text), so memory grows with call sites, not with ranks times
 * allocations.
 *
 * A rank is its rank number when the file has one, else its host and pid.
 * When a rank has several files (an OOM post-mortem, then the exit
 * snapshot; or the processes of a restarted job), its figures and call
 * sites come from the newest (written last on the wall clock): it has seen
 * all the others of its process have.
 */
#ifndef CUMEMTRACE_CLI_RANKS_H
#define CUMEMTRACE_CLI_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "hmap.h"

struct out_table;

#define RANKS_NONE SIZE_MAX

/* A range (a phase path: NVTX, PyTorch's phases) in one file, summed over
 * the file's devices and pinned host memory as `diff --by range` sums them;
 * kept only by a merge asked for ranges. */
struct rank_range {
    const char *path;      /* as text views print it; "(outside every range)" */
    uint64_t at_peak;      /* bytes it held at each device's peak */
    uint64_t live;         /* bytes its allocations held at the dump */
};

/* What one file says, kept after the file itself is released. */
struct rank_file {
    const char *path;
    const char *shown;     /* path as text views print it (esc.h) */
    const char *reason;    /* in the merge's arena, as text views print it */
    int64_t dump_time_ns;
    int64_t dump_wall_ns;  /* when it was written, on the wall clock (the
                              process's start + dump_time_ns), or unknown */
    uint64_t peak;         /* highest device peak */
    int64_t peak_device, peak_time_ns;
    const char *peak_range; /* the range (phase path) the highest peak was
                               reached in, as text views print it; NULL none */
    uint64_t end_bytes;    /* current bytes summed over devices */
    bool oom;              /* an OOM post-mortem */
    int64_t oom_device;    /* a post-mortem's failure: its device (-1 pinned */
    uint64_t oom_bytes;    /* host memory), the request, and when it */
    int64_t oom_time_ns;   /* failed (since the process started) */
    size_t row;
    bool has_phases;       /* the process opened a range (a merge with ranges) */
    const struct rank_range *ranges; /* its ranges, sorted by path (likewise) */
    size_t nranges;
};

struct rank_row {
    int64_t rank, local_rank, world_size, pid; /* SNAP_UNKNOWN_I64 unknown */
    const char *host, *exe;                    /* NULL when unknown */
    size_t chosen;         /* index in files of its newest file */
    size_t folded;         /* the file whose call sites are in the sites */
    size_t nfiles;
    bool several_pids;     /* files of more than one process (a restart) */
    uint64_t ooms;         /* OOMs the process saw (its files' highest count) */
    uint64_t failed_ooms;  /* of them, chains that never recovered (likewise) */
    int64_t start_wall_ns; /* the earliest start of its processes, or unknown */
    int64_t first_oom_ns;  /* first failed attempt, since its process started */
    int64_t first_oom_start_ns; /* when that process started (wall clock) */
    int64_t first_oom_device;
    uint64_t first_oom_bytes;
    size_t postmortem;     /* its first OOM post-mortem file, or RANKS_NONE */
    char reasons[64];      /* why its files were written: "exit, oom" */
    bool peak_tensors;     /* its folded file has PyTorch's tensors at the */
    bool now_tensors;      /* peak / at the dump, on every device (--segments: no) */
};

/* What the sites' bytes are (ranks_use): the driver's segments at each
 * rank's device peaks (by the stack that allocated them: for PyTorch, the
 * line that created each cached segment); PyTorch's tensors by the user's
 * line at each rank's peak (`peak_tensors`); or PyTorch's tensors live in
 * each rank's newest file (at the failure of a post-mortem, else at the
 * dump) - the tables each rank's own `report` prints. */
enum ranks_moment {
    RANKS_SEGMENTS,
    RANKS_TENSORS_NOW,
    RANKS_TENSORS_PEAK,
};

/* A call site over all ranks: what each rank's file held there at its
 * device peaks (at_peak, summed over its devices), or a line of PyTorch's
 * tensors (moment), summed over the rank's devices likewise. */
struct rank_site {
    const char *key;               /* frames_site_text, in the arena */
    size_t key_len;
    const char *display, *callers; /* as report prints them */
    uint64_t total, min, max;      /* min and max over the ranks that have it */
    size_t max_row;
    uint32_t nranks;
    enum ranks_moment moment;
};

struct ranks {
    struct arena arena;
    struct hmap row_keys, site_keys;
    struct rank_file *files;
    size_t nfiles, files_cap;
    struct rank_row *rows; /* in order of rank number, then first seen */
    size_t nrows, rows_cap;
    struct rank_site *sites;
    size_t nsites, sites_cap;
    int64_t world_size;    /* the largest any file states, or unknown */
    enum ranks_moment moment; /* of the sites kept (ranks_use) */
    bool with_ranges;      /* files keep their ranges (ranks_merge) */
    char **owned_paths;    /* for callers that keep the paths with the merge */
    size_t nowned;         /* (not freed by ranks_free) */
};

/* Expands paths: a directory stands for the *.json files directly in it,
 * sorted by name; other paths are kept.  *out is a malloc'd array of
 * malloc'd strings (ranks_paths_free).  Returns 0, or a CLI_E* code after
 * printing why. */
int ranks_expand(char **paths, size_t n, char ***out, size_t *nout);
void ranks_paths_free(char **paths, size_t n);

/* True when any of paths is a directory. */
bool ranks_any_dir(char **paths, size_t n);

/* Reads every file into r (which it initialises); with `ranges`, each file
 * keeps its ranges too (rank_file.ranges: memory grows with ranks times
 * ranges, so only views that show them ask).  Returns 0, or a CLI_E* code
 * after printing the error line (r is then freed). */
int ranks_merge(struct ranks *r, char **paths, size_t n, bool ranges);
void ranks_free(struct ranks *r);

/* The moment a merge's sites are best told at: PyTorch's tensors at the
 * peak when every rank's file has them, else live at each rank's newest
 * file when every one has those, else the driver's segments. */
enum ranks_moment ranks_best(const struct ranks *r);

/* Keeps only the sites of moment m (a merge folds all three). */
void ranks_use(struct ranks *r, enum ranks_moment m);

/* The row of rank number `rank`, or RANKS_NONE. */
size_t ranks_find(const struct ranks *r, int64_t rank);

/* "rank 3", else "pid 4242 on host" (into buf). */
const char *ranks_name(const struct rank_row *row, char *buf, size_t n);

/* Sites sorted by total, largest first (ties: display): an array of
 * indices, malloc'd; NULL when out of memory. */
size_t *ranks_sites_sorted(const struct ranks *r);

/* `cumemtrace report` over several files or directories (paths expanded):
 * the per-rank view, then the detailed file; with `one`, the report of
 * rank `rank` alone (json: its --json model).  Returns the exit status. */
struct gate;

/* `cumemtrace diff BASE NEW` where either is a directory: ranks matched by
 * rank number, then host and local rank; the gate applies to each rank's
 * peak and fails on the worst, naming it.  With by_range, each rank's
 * ranges are compared instead of the call sites.  Returns the exit status. */
int ranks_diff_main(char *base, char *now, const struct gate *g, unsigned top, bool by_range);

int ranks_report_main(char **paths, size_t n, bool json, unsigned top, bool one,
                      int64_t rank);

/* The end of a changed-call-sites table, shared by the file diff and the
 * rank diff (diff.c): prints (or frees) the table of n changed sites shown
 * up to `top`, the total of those left out, the unchanged count. */
int diff_changes_finish(FILE *f, struct out_table *t, size_t n, size_t top, int64_t rest,
                        size_t unchanged);

#endif
