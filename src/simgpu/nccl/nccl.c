/* nccl.c - the simulated GPU's libnccl.so.2, communicators: version, unique
 * ids, init (rank, config, scalable, all), split, shrink, grow, finalize,
 * destroy, abort, revoke, suspend/resume, async-error polling, and the error
 * strings.  Collectives and groups are in nccl_coll.c, memory in nccl_mem.c.
 *
 * The stand-in never talks to the other ranks: torch.distributed's
 * rendezvous (the TCPStore that carries rank 0's unique id to the others)
 * is CPU-side and real, but a communicator here is what this rank was told -
 * its size and its rank - and init returns at once instead of waiting for
 * every rank to arrive.  So a 2-rank job is two processes, each on its own
 * simulated device (SIMCUDA_DEVICES=2, LOCAL_RANK picks one) or on device 0
 * of its own simulated GPU; what collectives do to data is in nccl_coll.c.
 *
 * Memory: NVIDIA's NCCL takes device memory for its channels' buffers when a
 * communicator is created (how much depends on the topology, the protocols
 * and NCCL_BUFFSIZE); the stand-in takes SIMCUDA_NCCL_MEMORY bytes per
 * communicator (default 0) through ncclMemAlloc's path, so the tracer sees
 * them as NCCL's, and gives them back at destroy or abort.
 *
 * Threads: PyTorch's watchdog polls ncclCommGetAsyncError while its main
 * thread issues collectives; a communicator is only read after init, except
 * its state (an int) and the suspend/resume of its memory, which PyTorch
 * never does concurrently with other calls on the same communicator.
 */
#include "nccl_impl.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"
#include "sim_common.h"

#define SPEAKER "simnccl"
#define ID_MAGIC UINT64_C(0x314c43434e4d4953) /* "SIMNCCL1" */
#define CONFIG_MAGIC 0xcafebeefu              /* NCCL_API_MAGIC */
#define SUSPEND_MEM 0x01                      /* NCCL_SUSPEND_MEM */

/* The head of ncclConfig_t, identical in every NCCL since 2.14: what the
 * stand-in reads (it keeps none of the tuning fields). */
struct nccl_config_head {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
};

/* What the simulated id holds, in its first 32 bytes. */
struct id_words {
    uint64_t magic, pid, counter, time_ns;
};
_Static_assert(sizeof(struct id_words) <= sizeof(nccl_unique_id), "the id holds its words");

static _Thread_local char last_error[256];
static atomic_ulong id_counter;

int nccl_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (sim_common_env_flag("SIMCUDA_LOG"))
        sim_common_say(SPEAKER, "%s", last_error);
    return code;
}

struct sim_nccl_comm *nccl_comm_of(void *comm, const char *who)
{
    struct sim_nccl_comm *c = comm;
    if (c == NULL) {
        nccl_fail(NCCL_INVALID_ARGUMENT, "%s: the communicator is NULL", who);
        return NULL;
    }
    if (c->magic != COMM_MAGIC) {
        nccl_fail(NCCL_INVALID_ARGUMENT, "%s: %p is not a live communicator", who, comm);
        return NULL;
    }
    return c;
}

NCCL_API int ncclGetVersion(int *version)
{
    if (version == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclGetVersion: version is NULL");
    *version = SIM_NCCL_VERSION;
    return NCCL_SUCCESS;
}

static void make_id(nccl_unique_id *id)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct id_words w = {ID_MAGIC, (uint64_t)getpid(), atomic_fetch_add(&id_counter, 1) + 1,
                         (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec};
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &w, sizeof w);
}

NCCL_API int ncclGetUniqueId(nccl_unique_id *id)
{
    if (id == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclGetUniqueId: uniqueId is NULL");
    make_id(id);
    return NCCL_SUCCESS;
}

/* Reads the config's head: -1 if it was not made with NCCL_CONFIG_INITIALIZER
 * (NVIDIA's NCCL refuses it too), else 0 and *blocking (1 unless 0 was set). */
static int read_config(const void *config, int *blocking)
{
    *blocking = 1;
    if (config == NULL)
        return 0;
    const struct nccl_config_head *h = config;
    if (h->magic != CONFIG_MAGIC || h->size < sizeof *h)
        return -1;
    if (h->blocking == 0)
        *blocking = 0;
    return 0;
}

/* Makes *out a new live communicator of nranks with this rank, on the
 * current device; 0, or an ncclResult_t with the last error set. */
static int comm_new(const char *who, int nranks, int rank, const uint64_t id[2],
                    const void *config, struct sim_nccl_comm **out)
{
    int blocking;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "%s: rank %d of %d ranks is out of range", who,
                         rank, nranks);
    if (read_config(config, &blocking) != 0)
        return nccl_fail(NCCL_INVALID_ARGUMENT,
                         "%s: the config was not initialised with NCCL_CONFIG_INITIALIZER", who);
    struct sim_nccl_comm *c = calloc(1, sizeof *c);
    if (c == NULL)
        return nccl_fail(NCCL_SYSTEM_ERROR, "%s: out of host memory", who);
    c->nranks = nranks;
    c->rank = rank;
    c->blocking = blocking;
    c->next_op = NCCL_NUM_OPS;
    c->id[0] = id[0];
    c->id[1] = id[1];
    if (cudaGetDevice(&c->device) != cudaSuccess) {
        free(c);
        return nccl_fail(NCCL_UNHANDLED_CUDA_ERROR, "%s: cudaGetDevice failed", who);
    }
    uint64_t bytes = sim_common_env_size(SPEAKER, "SIMCUDA_NCCL_MEMORY", 0, 0, UINT64_C(1) << 40);
    if (bytes != 0) {
        int r = nccl_mem_alloc(&c->memory, (size_t)bytes);
        if (r != NCCL_SUCCESS) {
            char why[sizeof last_error];
            memcpy(why, last_error, sizeof why);
            free(c);
            return nccl_fail(r, "%s: cannot take the communicator's %llu bytes of device "
                                "memory (SIMCUDA_NCCL_MEMORY): %s", who,
                             (unsigned long long)bytes, why);
        }
        c->memory_bytes = (size_t)bytes;
    }
    c->magic = COMM_MAGIC;
    *out = c;
    return NCCL_SUCCESS;
}

static int comm_free(struct sim_nccl_comm *c)
{
    int r = NCCL_SUCCESS;
    if (c->memory != NULL)
        r = nccl_mem_free(c->memory);
    c->magic = 0;
    free(c);
    return r;
}

/* The id's pid and counter words, or -1 for an id ncclGetUniqueId did not make. */
static int id_key(const nccl_unique_id *id, uint64_t key[2])
{
    struct id_words w;
    memcpy(&w, id->internal, sizeof w);
    if (w.magic != ID_MAGIC)
        return -1;
    key[0] = w.pid;
    key[1] = w.counter;
    return 0;
}

static int init(const char *who, void **out, int nranks, const nccl_unique_id *id, int rank,
                const void *config)
{
    uint64_t key[2];
    if (out == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "%s: comm is NULL", who);
    if (id == NULL || id_key(id, key) != 0)
        return nccl_fail(NCCL_INVALID_ARGUMENT,
                         "%s: the unique id did not come from ncclGetUniqueId", who);
    struct sim_nccl_comm *c;
    int r = comm_new(who, nranks, rank, key, config, &c);
    if (r == NCCL_SUCCESS)
        *out = c;
    return r;
}

NCCL_API int ncclCommInitRank(void **comm, int nranks, nccl_unique_id id, int rank)
{
    return init("ncclCommInitRank", comm, nranks, &id, rank, NULL);
}

NCCL_API int ncclCommInitRankConfig(void **comm, int nranks, nccl_unique_id id, int rank,
                                    void *config)
{
    return init("ncclCommInitRankConfig", comm, nranks, &id, rank, config);
}

NCCL_API int ncclCommInitRankScalable(void **comm, int nranks, int rank, int nids,
                                      nccl_unique_id *ids, void *config)
{
    if (nids < 1 || ids == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommInitRankScalable: no unique id given");
    return init("ncclCommInitRankScalable", comm, nranks, &ids[0], rank, config);
}

NCCL_API int ncclCommInitAll(void **comms, int ndev, const int *devlist)
{
    nccl_unique_id id;
    uint64_t key[2];
    if (comms == NULL || ndev < 1)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommInitAll: no communicators asked for");
    make_id(&id);
    id_key(&id, key);
    int before;
    if (cudaGetDevice(&before) != cudaSuccess)
        return nccl_fail(NCCL_UNHANDLED_CUDA_ERROR, "ncclCommInitAll: cudaGetDevice failed");
    for (int i = 0; i < ndev; i++) {
        int dev = devlist != NULL ? devlist[i] : i;
        struct sim_nccl_comm *c = NULL;
        int r = cudaSetDevice(dev) == cudaSuccess
                    ? comm_new("ncclCommInitAll", ndev, i, key, NULL, &c)
                    : nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommInitAll: no device %d", dev);
        if (r != NCCL_SUCCESS) {
            while (i-- > 0)
                comm_free(comms[i]);
            cudaSetDevice(before);
            return r;
        }
        comms[i] = c;
    }
    cudaSetDevice(before);
    return NCCL_SUCCESS;
}

/* A child of parent (split, shrink, grow) on the parent's device. */
static int child(const char *who, struct sim_nccl_comm *parent, int nranks, int rank,
                 void **out, const void *config)
{
    int before, r = NCCL_SUCCESS;
    if (cudaGetDevice(&before) != cudaSuccess || cudaSetDevice(parent->device) != cudaSuccess)
        return nccl_fail(NCCL_UNHANDLED_CUDA_ERROR, "%s: cannot select device %d", who,
                         parent->device);
    struct sim_nccl_comm *c;
    r = comm_new(who, nranks, rank, parent->id, config, &c);
    if (r == NCCL_SUCCESS)
        *out = c;
    cudaSetDevice(before);
    return r;
}

/* Ranks that give the same color form a communicator; NVIDIA's NCCL learns
 * the others' colors from them.  The stand-in cannot, so a rank that gives a
 * color keeps the parent's size and rank - right when every rank gives the
 * same color (a copy of the communicator), not for a subgroup
 * (docs/simgpu.md, fidelity limits). */
NCCL_API int ncclCommSplit(void *comm, int color, int key, void **newcomm, void *config)
{
    (void)key;
    NCCL_COMM(c, comm);
    if (newcomm == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommSplit: newcomm is NULL");
    if (color == NCCL_SPLIT_NOCOLOR) {
        *newcomm = NULL;
        return NCCL_SUCCESS;
    }
    if (color < 0)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommSplit: color %d is negative", color);
    return child("ncclCommSplit", c, c->nranks, c->rank, newcomm, config);
}

/* Shrink needs no other rank: the excluded ranks are listed. */
NCCL_API int ncclCommShrink(void *comm, int *exclude, int nexclude, void **newcomm, void *config,
                            int flags)
{
    (void)flags;
    NCCL_COMM(c, comm);
    if (newcomm == NULL || nexclude < 0 || (nexclude > 0 && exclude == NULL))
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommShrink: bad arguments");
    int gone = 0, below = 0;
    for (int r = 0; r < c->nranks; r++) {
        int out = 0;
        for (int i = 0; i < nexclude && !out; i++)
            out = exclude[i] == r;
        if (out) {
            gone++;
            below += r < c->rank;
            if (r == c->rank) {
                *newcomm = NULL;
                return NCCL_SUCCESS;
            }
        }
    }
    if (gone == c->nranks)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommShrink: every rank excluded");
    return child("ncclCommShrink", c, c->nranks - gone, c->rank - below, newcomm, config);
}

NCCL_API int ncclCommGetUniqueId(void *comm, nccl_unique_id *id)
{
    if (nccl_comm_of(comm, "ncclCommGetUniqueId") == NULL)
        return NCCL_INVALID_ARGUMENT;
    return ncclGetUniqueId(id);
}

/* Existing ranks keep their rank, new ones take the one they were given. */
NCCL_API int ncclCommGrow(void *comm, int nranks, const nccl_unique_id *id, int rank,
                          void **newcomm, void *config)
{
    if (newcomm == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommGrow: newcomm is NULL");
    if (comm == NULL)
        return init("ncclCommGrow", newcomm, nranks, id, rank, config);
    NCCL_COMM(c, comm);
    if (nranks <= c->nranks)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommGrow: %d ranks is no growth from %d",
                         nranks, c->nranks);
    return child("ncclCommGrow", c, nranks, c->rank, newcomm, config);
}

NCCL_API int ncclCommFinalize(void *comm)
{
    NCCL_COMM(c, comm);
    if (c->state == COMM_REVOKED)
        return nccl_fail(NCCL_INVALID_USAGE, "ncclCommFinalize: the communicator was revoked");
    c->state = COMM_FINALIZED;
    return NCCL_SUCCESS;
}

NCCL_API int ncclCommDestroy(void *comm)
{
    if (comm == NULL) /* NVIDIA's NCCL: destroying NULL is a no-op */
        return NCCL_SUCCESS;
    struct sim_nccl_comm *c = nccl_comm_of(comm, "ncclCommDestroy");
    return c == NULL ? NCCL_INVALID_ARGUMENT : comm_free(c);
}

NCCL_API int ncclCommAbort(void *comm)
{
    if (comm == NULL)
        return NCCL_SUCCESS;
    struct sim_nccl_comm *c = nccl_comm_of(comm, "ncclCommAbort");
    return c == NULL ? NCCL_INVALID_ARGUMENT : comm_free(c);
}

NCCL_API int ncclCommRevoke(void *comm, int flags)
{
    NCCL_COMM(c, comm);
    if (flags != 0)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommRevoke: flags must be 0");
    c->state = COMM_REVOKED;
    return NCCL_SUCCESS;
}

/* NCCL_SUSPEND_MEM gives the communicator's memory back; resume takes it again. */
NCCL_API int ncclCommSuspend(void *comm, int flags)
{
    NCCL_COMM(c, comm);
    if (c->state != COMM_LIVE)
        return nccl_fail(NCCL_INVALID_USAGE, "ncclCommSuspend: the communicator is not active");
    if ((flags & SUSPEND_MEM) && c->memory != NULL) {
        int r = nccl_mem_free(c->memory);
        if (r != NCCL_SUCCESS)
            return r;
        c->memory = NULL;
    }
    c->state = COMM_SUSPENDED;
    return NCCL_SUCCESS;
}

NCCL_API int ncclCommResume(void *comm)
{
    NCCL_COMM(c, comm);
    if (c->state != COMM_SUSPENDED)
        return nccl_fail(NCCL_INVALID_USAGE, "ncclCommResume: the communicator is not suspended");
    if (c->memory == NULL && c->memory_bytes != 0) {
        int r = nccl_mem_alloc(&c->memory, c->memory_bytes);
        if (r != NCCL_SUCCESS)
            return r;
    }
    c->state = COMM_LIVE;
    return NCCL_SUCCESS;
}

/* ncclCommMemStat_t: 0 suspendable bytes, 1 suspended or not, 2 persistent
 * bytes, 3 total.  The communicator's memory is suspendable. */
NCCL_API int ncclCommMemStats(void *comm, int stat, uint64_t *value)
{
    NCCL_COMM(c, comm);
    if (value == NULL || stat < 0 || stat > 3)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommMemStats: bad stat %d", stat);
    uint64_t held = c->memory != NULL ? c->memory_bytes : 0;
    *value = stat == 1 ? (uint64_t)(c->state == COMM_SUSPENDED) : stat == 2 ? 0 : held;
    return NCCL_SUCCESS;
}

/* Nothing runs asynchronously, so nothing fails asynchronously. */
NCCL_API int ncclCommGetAsyncError(void *comm, int *error)
{
    if (nccl_comm_of(comm, "ncclCommGetAsyncError") == NULL)
        return NCCL_INVALID_ARGUMENT;
    if (error == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommGetAsyncError: asyncError is NULL");
    *error = NCCL_SUCCESS;
    return NCCL_SUCCESS;
}

NCCL_API int ncclCommCount(void *comm, int *count)
{
    NCCL_COMM(c, comm);
    if (count == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommCount: count is NULL");
    *count = c->nranks;
    return NCCL_SUCCESS;
}

NCCL_API int ncclCommUserRank(void *comm, int *rank)
{
    NCCL_COMM(c, comm);
    if (rank == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclCommUserRank: rank is NULL");
    *rank = c->rank;
    return NCCL_SUCCESS;
}

NCCL_API const char *ncclGetErrorString(int result)
{
    static const char *const text[NCCL_NUM_RESULTS] = {
        "no error",
        "unhandled cuda error (the simulated NCCL: ncclGetLastError says which call)",
        "unhandled system error (the simulated NCCL: ncclGetLastError says which call)",
        "internal error",
        "invalid argument (ncclGetLastError says which)",
        "invalid usage (ncclGetLastError says which)",
        "remote process exited or there was a network error",
        "NCCL operation in progress",
        "NCCL timeout",
    };
    return result >= 0 && result < NCCL_NUM_RESULTS ? text[result] : "unknown result code";
}

NCCL_API const char *ncclGetLastError(void *comm)
{
    (void)comm; /* NVIDIA's NCCL ignores it too */
    return last_error;
}
