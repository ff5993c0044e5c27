/* nccl_impl.h - what the files of the simulated NCCL (nccl.c, nccl_coll.c,
 * nccl_mem.c: one library split by concern, one unit for
 * tests/e2e/test_link_cycles.py) share: result codes, the communicator,
 * the last-error message and the export marker.  NVIDIA's
 * nccl.h is not used: communicators and windows are opaque pointers,
 * enums int, ncclUniqueId a 128-byte struct passed by value - the same ABI.
 */
#ifndef CUMEMTRACE_SIM_NCCL_IMPL_H
#define CUMEMTRACE_SIM_NCCL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* ncclResult_t */
#define NCCL_SUCCESS 0
#define NCCL_UNHANDLED_CUDA_ERROR 1
#define NCCL_SYSTEM_ERROR 2
#define NCCL_INTERNAL_ERROR 3
#define NCCL_INVALID_ARGUMENT 4
#define NCCL_INVALID_USAGE 5
#define NCCL_NUM_RESULTS 9

#define NCCL_SPLIT_NOCOLOR (-1)
#define NCCL_NUM_OPS 5   /* sum, prod, max, min, avg; created ops count from here */
#define NCCL_NUM_TYPES 12

/* ncclUniqueId: 128 opaque bytes.  The simulated one holds a magic, the
 * creating pid, a per-process counter and the creation time, so two ids
 * differ and a zeroed or foreign id is refused. */
typedef struct {
    char internal[128];
} nccl_unique_id;

/* NCCL 2.30.7 (the PyPI wheel nvidia-nccl-cu13 2.30.7): NCCL_VERSION_CODE is
 * major * 10000 + minor * 100 + patch since 2.9. */
#define SIM_NCCL_VERSION 23007

/* A communicator: what the rank knows of itself.  The stand-in never talks
 * to the other ranks, so nranks and rank are what the caller said. */
struct sim_nccl_comm {
    uint32_t magic;     /* COMM_MAGIC while alive */
    int nranks, rank;
    int device;         /* the CUDA device current at init */
    int blocking;       /* config->blocking, 1 unless set to 0 */
    int state;          /* COMM_* below */
    uint64_t id[2];     /* the unique id's pid/counter words, for split's children */
    int next_op;        /* the next ncclRedOpCreatePreMulSum handle */
    void *memory;       /* SIMCUDA_NCCL_MEMORY taken at init (ncclMemAlloc), or NULL */
    size_t memory_bytes;
};

#define COMM_MAGIC 0x534e434du /* "SNCM" */
enum { COMM_LIVE, COMM_FINALIZED, COMM_REVOKED, COMM_SUSPENDED };

/* The entry points: the version script generated from nccl.syms exports
 * them; NCCL is unversioned. */
#define NCCL_API __attribute__((visibility("default")))

/* The live communicator comm points at, or NULL (and the last error says
 * why, naming `who`). */
struct sim_nccl_comm *nccl_comm_of(void *comm, const char *who);

/* In an entry point: c := the live communicator comm points at, or return
 * NCCL_INVALID_ARGUMENT (the last error naming the entry point). */
#define NCCL_COMM(c, comm)                                                     \
    struct sim_nccl_comm *c = nccl_comm_of(comm, __func__);                    \
    if (c == NULL)                                                             \
        return NCCL_INVALID_ARGUMENT

/* Stores the message ncclGetLastError returns (this thread's); returns
 * code, so that `return nccl_fail(NCCL_INVALID_ARGUMENT, "...")` reads. */
int nccl_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* nccl_mem.c: device memory through the driver's VMM entry points, as
 * NVIDIA's ncclMemAlloc takes it.  0 or an ncclResult_t. */
int nccl_mem_alloc(void **ptr, size_t size);
int nccl_mem_free(void *ptr);

#pragma GCC visibility pop

#endif
