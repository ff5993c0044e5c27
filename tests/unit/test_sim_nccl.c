/* test_sim_nccl.c - the simulated NCCL (src/simgpu/nccl): communicators and
 * their checks, what each collective leaves in device memory (read back
 * through the runtime's kept bytes), groups delivering non-root broadcasts,
 * ncclMemAlloc through the driver (free memory falls and comes back),
 * SIMCUDA_NCCL_MEMORY per communicator with suspend/resume, and the fault
 * sibling: a cuMemCreate that fails makes ncclMemAlloc fail cleanly. */
#include "sim_test.h"

/* nccl.h, as the stand-in implements it (opaque handles, enums as int). */
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef struct {
    size_t size;
    unsigned int magic, version;
    int blocking;
    int rest[40]; /* the tuning fields the stand-in ignores */
} ncclConfig_t;
int ncclGetVersion(int *version);
int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank);
int ncclCommInitRankConfig(void **comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *c);
int ncclCommInitAll(void **comms, int ndev, const int *devlist);
int ncclCommSplit(void *comm, int color, int key, void **newcomm, ncclConfig_t *config);
int ncclCommShrink(void *comm, int *exclude, int nexclude, void **newcomm, ncclConfig_t *config,
                   int flags);
int ncclCommFinalize(void *comm);
int ncclCommDestroy(void *comm);
int ncclCommAbort(void *comm);
int ncclCommSuspend(void *comm, int flags);
int ncclCommResume(void *comm);
int ncclCommMemStats(void *comm, int stat, uint64_t *value);
int ncclCommGetAsyncError(void *comm, int *error);
int ncclCommCount(void *comm, int *count);
int ncclCommUserRank(void *comm, int *rank);
const char *ncclGetErrorString(int result);
const char *ncclGetLastError(void *comm);
int ncclAllReduce(const void *s, void *r, size_t n, int type, int op, void *comm, void *stream);
int ncclBroadcast(const void *s, void *r, size_t n, int type, int root, void *comm, void *stream);
int ncclReduce(const void *s, void *r, size_t n, int type, int op, int root, void *comm,
               void *stream);
int ncclAllGather(const void *s, void *r, size_t n, int type, void *comm, void *stream);
int ncclReduceScatter(const void *s, void *r, size_t n, int type, int op, void *comm,
                      void *stream);
int ncclRecv(void *r, size_t n, int type, int peer, void *comm, void *stream);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclRedOpCreatePreMulSum(int *op, void *scalar, int type, int residence, void *comm);
int ncclRedOpDestroy(int op, void *comm);
int ncclMemAlloc(void **ptr, size_t size);
int ncclMemFree(void *ptr);
int ncclCommRegister(void *comm, void *buff, size_t size, void **handle);
int ncclCommDeregister(void *comm, void *handle);
int ncclDevCommCreate(void);

#define OK 0
#define INVALID_ARGUMENT 4
#define INVALID_USAGE 5
#define UNHANDLED_CUDA 1
#define INT32 2 /* ncclInt32 */
#define SUM 0

void *volatile sim_test_keep_libcuda = (void *)cuInit;

static ncclConfig_t config(void)
{
    ncclConfig_t c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    c.magic = 0xcafebeef; /* NCCL_CONFIG_INITIALIZER's */
    c.version = 23007;
    c.blocking = 0;
    return c;
}

static void *comm_of(int nranks, int rank)
{
    ncclUniqueId id;
    void *c = NULL;
    SIM_CHECK_EQ(ncclGetUniqueId(&id), OK);
    SIM_CHECK_EQ(ncclCommInitRank(&c, nranks, id, rank), OK);
    return c;
}

static void communicators_body(void)
{
    int v = 0, n = 0, r = -1, err = -1;
    SIM_CHECK_EQ(ncclGetVersion(&v), OK);
    SIM_CHECK_EQ(v, 23007);
    ncclUniqueId a, b, zero;
    memset(&zero, 0, sizeof zero);
    SIM_CHECK_EQ(ncclGetUniqueId(&a), OK);
    SIM_CHECK_EQ(ncclGetUniqueId(&b), OK);
    SIM_CHECK(memcmp(&a, &b, sizeof a) != 0);
    void *c = NULL;
    /* an id from nowhere, a rank out of range, a config not initialised */
    SIM_CHECK_EQ(ncclCommInitRank(&c, 2, zero, 0), INVALID_ARGUMENT);
    SIM_CHECK(strstr(ncclGetLastError(NULL), "ncclGetUniqueId") != NULL);
    SIM_CHECK_EQ(ncclCommInitRank(&c, 2, a, 2), INVALID_ARGUMENT);
    ncclConfig_t bad;
    memset(&bad, 0, sizeof bad);
    SIM_CHECK_EQ(ncclCommInitRankConfig(&c, 2, a, 1, &bad), INVALID_ARGUMENT);
    SIM_CHECK(strstr(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER") != NULL);
    ncclConfig_t cfg = config(); /* non-blocking: still done at once */
    SIM_CHECK_EQ(ncclCommInitRankConfig(&c, 2, a, 1, &cfg), OK);
    SIM_CHECK_EQ(ncclCommCount(c, &n), OK);
    SIM_CHECK_EQ(ncclCommUserRank(c, &r), OK);
    SIM_CHECK(n == 2 && r == 1);
    SIM_CHECK_EQ(ncclCommGetAsyncError(c, &err), OK);
    SIM_CHECK_EQ(err, OK);
    /* split: no color gives no communicator; a color a copy of this one */
    void *s = (void *)1;
    SIM_CHECK_EQ(ncclCommSplit(c, -1, 0, &s, NULL), OK);
    SIM_CHECK(s == NULL);
    SIM_CHECK_EQ(ncclCommSplit(c, 7, 0, &s, NULL), OK);
    SIM_CHECK_EQ(ncclCommCount(s, &n), OK);
    SIM_CHECK_EQ(n, 2);
    SIM_CHECK_EQ(ncclCommDestroy(s), OK);
    /* shrink: rank 1 of 3 without rank 0 is rank 0 of 2; excluded, none */
    void *three = comm_of(3, 1), *small = NULL;
    int ex0 = 0, ex1 = 1;
    SIM_CHECK_EQ(ncclCommShrink(three, &ex0, 1, &small, NULL, 0), OK);
    SIM_CHECK_EQ(ncclCommCount(small, &n), OK);
    SIM_CHECK_EQ(ncclCommUserRank(small, &r), OK);
    SIM_CHECK(n == 2 && r == 0);
    SIM_CHECK_EQ(ncclCommShrink(three, &ex1, 1, &s, NULL, 0), OK);
    SIM_CHECK(s == NULL);
    SIM_CHECK_EQ(ncclCommAbort(small), OK);
    SIM_CHECK_EQ(ncclCommDestroy(three), OK);
    /* finalize, then collectives are refused; destroy; NULL is a no-op */
    int *d = NULL;
    SIM_CHECK_RT(cudaMalloc((void **)&d, 4096), cudaSuccess);
    SIM_CHECK_EQ(ncclCommFinalize(c), OK);
    SIM_CHECK_EQ(ncclAllReduce(d, d, 4, INT32, SUM, c, NULL), INVALID_USAGE);
    SIM_CHECK_EQ(ncclCommDestroy(c), OK);
    SIM_CHECK_EQ(ncclCommDestroy(NULL), OK);
    /* errors */
    SIM_CHECK_EQ(ncclGroupEnd(), INVALID_USAGE);
    SIM_CHECK(strcmp(ncclGetErrorString(OK), "no error") == 0);
    SIM_CHECK(strcmp(ncclGetErrorString(99), "unknown result code") == 0);
    SIM_CHECK_EQ(ncclDevCommCreate(), INVALID_USAGE);
    /* single-process clique: one communicator per device */
    void *all[2] = {NULL, NULL};
    SIM_CHECK_EQ(ncclCommInitAll(all, 2, NULL), OK);
    SIM_CHECK_EQ(ncclCommUserRank(all[1], &r), OK);
    SIM_CHECK_EQ(r, 1);
    SIM_CHECK_EQ(ncclCommDestroy(all[0]), OK);
    SIM_CHECK_EQ(ncclCommDestroy(all[1]), OK);
    SIM_CHECK_RT(cudaFree(d), cudaSuccess);
}
SIM_TEST(communicators, communicators_body, "SIMCUDA_DEVICES=2")

static void put(int *d, const int *v, size_t n)
{
    SIM_CHECK_RT(cudaMemcpy(d, v, n * sizeof *v, cudaMemcpyHostToDevice), cudaSuccess);
}

static void get(int *v, const int *d, size_t n)
{
    SIM_CHECK_RT(cudaMemcpy(v, d, n * sizeof *v, cudaMemcpyDeviceToHost), cudaSuccess);
}

/* Rank 1 of 2: what each collective leaves in this rank's buffers. */
static void collectives_body(void)
{
    void *c = comm_of(2, 1);
    int *send = NULL, *recv = NULL, out[8];
    const int in[4] = {10, 11, 12, 13};
    SIM_CHECK_RT(cudaMalloc((void **)&send, 4096), cudaSuccess);
    SIM_CHECK_RT(cudaMalloc((void **)&recv, 4096), cudaSuccess);
    put(send, in, 4);
    /* all-reduce out of place: recvbuff := sendbuff */
    SIM_CHECK_EQ(ncclAllReduce(send, recv, 4, INT32, SUM, c, NULL), OK);
    get(out, recv, 4);
    SIM_CHECK(out[0] == 10 && out[3] == 13);
    /* all-gather: every rank's slot holds this rank's data */
    SIM_CHECK_EQ(ncclAllGather(send, recv, 4, INT32, c, NULL), OK);
    get(out, recv, 8);
    SIM_CHECK(out[0] == 10 && out[3] == 13 && out[4] == 10 && out[7] == 13);
    /* reduce-scatter: this rank's block (rank 1: elements 2 and 3) */
    SIM_CHECK_EQ(ncclReduceScatter(send, recv, 2, INT32, SUM, c, NULL), OK);
    get(out, recv, 2);
    SIM_CHECK(out[0] == 12 && out[1] == 13);
    /* reduce to rank 0: rank 1's recvbuff is untouched */
    const int z[4] = {0, 0, 0, 0};
    put(recv, z, 4);
    SIM_CHECK_EQ(ncclReduce(send, recv, 4, INT32, SUM, 0, c, NULL), OK);
    get(out, recv, 4);
    SIM_CHECK_EQ(out[0], 0);
    /* PyTorch's all-gather into separate tensors: one broadcast per root in
     * a group; the one from root 0 receives what this rank broadcasts */
    put(recv, z, 4);
    SIM_CHECK_EQ(ncclGroupStart(), OK);
    SIM_CHECK_EQ(ncclBroadcast(recv, recv, 4, INT32, 0, c, NULL), OK);
    get(out, recv, 1);
    SIM_CHECK_EQ(out[0], 0); /* not before ncclGroupEnd */
    SIM_CHECK_EQ(ncclBroadcast(send, recv + 64, 4, INT32, 1, c, NULL), OK);
    SIM_CHECK_EQ(ncclGroupEnd(), OK);
    get(out, recv, 4);
    SIM_CHECK(out[0] == 10 && out[3] == 13);
    /* outside a group a non-root broadcast of its own buffer changes nothing */
    put(recv, z, 4);
    SIM_CHECK_EQ(ncclBroadcast(recv, recv, 4, INT32, 0, c, NULL), OK);
    get(out, recv, 1);
    SIM_CHECK_EQ(out[0], 0);
    /* receive keeps what was there */
    SIM_CHECK_EQ(ncclRecv(recv, 4, INT32, 0, c, NULL), OK);
    SIM_CHECK_EQ(ncclRecv(recv, 4, INT32, 2, c, NULL), INVALID_ARGUMENT);
    /* arguments checked */
    SIM_CHECK_EQ(ncclAllReduce(send, recv, 4, 12, SUM, c, NULL), INVALID_ARGUMENT);
    SIM_CHECK_EQ(ncclAllReduce(send, recv, 4, INT32, 5, c, NULL), INVALID_ARGUMENT);
    SIM_CHECK_EQ(ncclBroadcast(send, recv, 4, INT32, 2, c, NULL), INVALID_ARGUMENT);
    SIM_CHECK_EQ(ncclAllReduce(send, recv, 4, INT32, SUM, NULL, NULL), INVALID_ARGUMENT);
    /* a pre-multiplied sum is an operator until destroyed */
    int op = -1;
    float scale = 0.5f;
    SIM_CHECK_EQ(ncclRedOpCreatePreMulSum(&op, &scale, 7, 1, c), OK);
    SIM_CHECK_EQ(op, 5);
    SIM_CHECK_EQ(ncclAllReduce(send, send, 4, INT32, op, c, NULL), OK);
    SIM_CHECK_EQ(ncclRedOpDestroy(op, c), OK);
    SIM_CHECK_EQ(ncclRedOpDestroy(SUM, c), INVALID_ARGUMENT);
    /* registration hands back a handle for this communicator only */
    void *h = NULL, *other = comm_of(2, 0);
    SIM_CHECK_EQ(ncclCommRegister(c, send, 4096, &h), OK);
    SIM_CHECK_EQ(ncclCommDeregister(other, h), INVALID_ARGUMENT);
    SIM_CHECK_EQ(ncclCommDeregister(c, h), OK);
    SIM_CHECK_EQ(ncclCommDestroy(other), OK);
    SIM_CHECK_EQ(ncclCommDestroy(c), OK);
    SIM_CHECK_RT(cudaFree(send), cudaSuccess);
    SIM_CHECK_RT(cudaFree(recv), cudaSuccess);
}
SIM_TEST(collectives, collectives_body, NULL)

static uint64_t free_now(void)
{
    size_t f = 0, t = 0;
    SIM_CHECK_RT(cudaMemGetInfo(&f, &t), cudaSuccess);
    return f;
}

/* ncclMemAlloc maps memory through the driver, rounded to its 2 MiB
 * granularity; ncclMemFree gives it back. */
static void mem_alloc_body(void)
{
    void *p = NULL, *q = NULL;
    SIM_CHECK_RT(cudaFree(NULL), cudaSuccess); /* the context reserve, first */
    uint64_t before = free_now();
    SIM_CHECK_EQ(ncclMemAlloc(&p, 3 * MiB), OK);
    SIM_CHECK_EQ(before - free_now(), 4 * MiB);
    struct cudaPointerAttributes pa;
    SIM_CHECK_RT(cudaPointerGetAttributes(&pa, p), cudaSuccess);
    SIM_CHECK_EQ(pa.type, cudaMemoryTypeDevice);
    SIM_CHECK_EQ(ncclMemAlloc(&q, 0), OK);
    SIM_CHECK(q == NULL);
    SIM_CHECK_EQ(ncclMemFree(p), OK);
    SIM_CHECK_EQ(free_now(), before);
    SIM_CHECK_EQ(ncclMemFree(p), INVALID_ARGUMENT); /* twice */
    SIM_CHECK_EQ(ncclMemFree(NULL), OK);
}
SIM_TEST(mem_alloc, mem_alloc_body, NULL)

/* SIMCUDA_NCCL_MEMORY: each communicator takes that much, suspend gives it
 * back, resume takes it again, destroy frees it. */
static void comm_memory_body(void)
{
    SIM_CHECK_RT(cudaFree(NULL), cudaSuccess);
    uint64_t before = free_now(), v = 0;
    void *c = comm_of(2, 0);
    SIM_CHECK_EQ(before - free_now(), 64 * MiB);
    SIM_CHECK_EQ(ncclCommMemStats(c, 3, &v), OK);
    SIM_CHECK_EQ(v, 64 * MiB);
    SIM_CHECK_EQ(ncclCommSuspend(c, 1), OK);
    SIM_CHECK_EQ(free_now(), before);
    SIM_CHECK_EQ(ncclCommMemStats(c, 1, &v), OK);
    SIM_CHECK_EQ(v, 1);
    int *d = NULL;
    SIM_CHECK_RT(cudaMalloc((void **)&d, 4096), cudaSuccess);
    SIM_CHECK_EQ(ncclAllReduce(d, d, 4, INT32, SUM, c, NULL), INVALID_USAGE);
    SIM_CHECK_EQ(ncclCommResume(c), OK);
    SIM_CHECK_EQ(ncclAllReduce(d, d, 4, INT32, SUM, c, NULL), OK);
    SIM_CHECK_EQ(ncclCommDestroy(c), OK);
    SIM_CHECK_RT(cudaFree(d), cudaSuccess);
    SIM_CHECK_EQ(free_now(), before);
}
SIM_TEST(comm_memory, comm_memory_body, "SIMCUDA_NCCL_MEMORY=64MiB")

/* The driver refuses the physical memory: ncclMemAlloc says so, leaves
 * nothing behind, and a communicator that needs it is not made. */
static void mem_alloc_fault_body(void)
{
    SIM_CHECK_RT(cudaFree(NULL), cudaSuccess);
    uint64_t before = free_now();
    void *p = NULL, *c = NULL;
    SIM_CHECK(ncclMemAlloc(&p, MiB) != OK);
    SIM_CHECK(strstr(ncclGetLastError(NULL), "cuMemCreate") != NULL);
    ncclUniqueId id;
    SIM_CHECK_EQ(ncclGetUniqueId(&id), OK);
    SIM_CHECK(ncclCommInitRank(&c, 2, id, 0) != OK);
    SIM_CHECK(strstr(ncclGetLastError(NULL), "SIMCUDA_NCCL_MEMORY") != NULL);
    SIM_CHECK(c == NULL);
    SIM_CHECK_EQ(free_now(), before);
}
SIM_TEST(mem_alloc_fault, mem_alloc_fault_body, "SIMCUDA_FAIL=cuMemCreate:1+",
         "SIMCUDA_NCCL_MEMORY=8MiB")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(communicators),   cmocka_unit_test(collectives),
        cmocka_unit_test(mem_alloc),       cmocka_unit_test(comm_memory),
        cmocka_unit_test(mem_alloc_fault),
    };
    return cmocka_run_group_tests_name("sim_nccl", tests, NULL, NULL);
}
