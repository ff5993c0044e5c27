/* output.h - where snapshot files go, and writing them safely. */
#ifndef CUMEMTRACE_OUTPUT_H
#define CUMEMTRACE_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

/* Process facts used in names and in snapshots, filled at initialisation. */
struct output_process {
    char exe[256];   /* executable basename; a Python script's stem */
    char host[256];
    int rank;        /* RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID, or -1 */
    int local_rank;  /* LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_RANK / SLURM_LOCALID, or -1 */
    int world_size;  /* WORLD_SIZE / OMPI_COMM_WORLD_SIZE / SLURM_NTASKS, or -1 */
    long long start_wall_ns;
};
extern struct output_process output_process;

void output_init(void);

/* (Re)reads the rank variables into output_process.  At load, and again at
 * the first CUDA call: code under torch.multiprocessing.spawn sets RANK in
 * the child's environment (os.environ) after the library loaded and before
 * it touches CUDA. */
void output_read_rank(void);

/* Expands CUMEMTRACE_OUTPUT for one dump: %p pid, %e exe, %h host, %r rank,
 * %t start time, %% percent; a directory gets the default file name.  Dumps
 * other than the exit snapshot get ".<reason>.<seq>" before ".json".
 * Returns 0, or -1 if the result does not fit. */
int output_expand(const char *pattern, const char *reason, unsigned seq,
                  char *out, size_t len);

/* Creates a temporary file beside `final` under an unpredictable name
 * (O_EXCL, O_NOFOLLOW, mode 0644 at most, retried on a collision) and locks
 * it (flock): the caller keeps a descriptor of it open until output_commit
 * returned.  Returns the fd, or -1 with errno set. */
int output_open_temp(const char *final, char *tmp, size_t tmplen);

/* Removes from `dir` the temporaries of output_open_temp that a killed
 * writer left: our exact name shape, a regular file of our effective user
 * with one link, and unlocked.  Anything else is left alone. */
void output_clean_stale(const char *dir);

/* Publishes the temporary file under `final`.  replace=false never replaces
 * an existing file (or symlink): a free name "<final>.<n>" is taken instead;
 * replace=true renames over a file this process wrote itself.  Stores the
 * name used in `actual`.  Returns 0, or -1 with errno set (tmp removed). */
int output_commit(const char *tmp, const char *final, bool replace,
                  char *actual, size_t len);

/* At the process's first CUDA call: checks that snapshots can be created
 * where CUMEMTRACE_OUTPUT says; if not (a missing or read-only directory, a
 * FIFO or device named as the file), warns once and falls back to the
 * current directory, $TMPDIR, then /tmp, naming where files will go.  Then
 * removes what killed dumps left there (output_clean_stale). */
void output_prepare(void);

/* The pattern dumps are named from: CUMEMTRACE_OUTPUT, or the fallback
 * output_prepare chose. */
const char *output_pattern(void);

/* CUMEMTRACE_MANIFEST is how `cumemtrace run` learns what its children did,
 * one line each: "cuda <pid> <exe>" at a process's first CUDA call,
 * "wrote <pid> <reason>[:<signal>] <path>" per snapshot, "failed <pid>
 * <reason> <path>" per snapshot not written, "stream <pid> - <path>" when a
 * stream file is created. */
void output_manifest(const char *path, const char *reason, const char *signame);
void output_manifest_stream(const char *path);
/* "failed <pid> <reason> <path>": a snapshot that could not be written (a
 * full disk), so that `cumemtrace run` says so instead of a silent end. */
void output_manifest_failed(const char *path, const char *reason);
void output_manifest_cuda(void);

#endif
