/* nccl_coll.c - the simulated NCCL's collectives, point-to-point calls,
 * reduction operators and groups.
 *
 * No rank sees another's data, so each collective leaves this rank's buffers
 * as a real one would if every rank held the same bytes as this one (the
 * "identical ranks" rule; same seed, same batch - and kernels compute
 * nothing, so most device memory is zeros on every rank anyway):
 *
 *   AllReduce       recvbuff := sendbuff (in place: unchanged).  The true
 *                   result for max, min and avg; for sum it is 1/nranks of
 *                   the true one unless the values are 0 (or were divided
 *                   by nranks first, as DDP's gradients are); prod: x^nranks.
 *   Broadcast       recvbuff := sendbuff on the root, and on a rank that
 *                   passes its own sendbuff.  A rank that passes none (its
 *                   recvbuff, or NULL) inside a group gets what it itself
 *                   broadcasts as root in that group: PyTorch's all-gather
 *                   into separate tensors is one broadcast per root in a
 *                   group, and DDP's check that every rank has the same
 *                   parameter shapes reads the result.  Outside a group, or
 *                   with no matching root broadcast, nothing changes.
 *   Reduce          on the root as AllReduce; other ranks: nothing.
 *   AllGather       every rank's slot of recvbuff := sendbuff.
 *   ReduceScatter   recvbuff := this rank's block of sendbuff (as AllReduce).
 *   AlltoAll        every slot of recvbuff := this rank's block of sendbuff
 *                   (the block every identical peer sends here).
 *   Gather          on the root, every slot := sendbuff; others: nothing.
 *   Send, Recv      nothing: recvbuff keeps what this rank had there.
 *
 * The copies are cudaMemcpyAsync device-to-device on the caller's stream,
 * so what the simulated runtime keeps of device memory (small buffers: DDP's
 * shapes check, its used-parameters map) reads back as above.  Nothing
 * waits for a peer: a collective that one rank skips does not hang the
 * others, as it would with NVIDIA's NCCL.
 *
 * Groups: every call runs when it is made, except the non-root broadcasts
 * above, which wait for the outermost ncclGroupEnd (NVIDIA's NCCL runs the
 * whole group there).
 */
#include "nccl_impl.h"

#include "cuda_api.h"
#include "sim_common.h"

#define SIM_INFO_MAGIC 0x74685283u /* NCCL_SIM_INFO_INITIALIZER's */
#define NO_OP (-1)                 /* a collective without a reduction */

/* ncclDataType_t: int8, uint8, int32, uint32, int64, uint64, float16,
 * float32, float64, bfloat16, fp8 e4m3, fp8 e5m2. */
static const unsigned char type_bytes[NCCL_NUM_TYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

/* A broadcast of this group: as root, what this rank sent; not root and
 * without data of its own, where it waits to receive. */
struct bcast {
    void *comm;
    int root;
    const void *send; /* root: sendbuff */
    void *recv;       /* not root: recvbuff */
    size_t bytes;
    cudaStream_t stream;
};

/* The open group of this thread (groups are per thread in NCCL too). */
static _Thread_local struct {
    int depth;
    struct bcast *sent, *waiting;
    size_t nsent, nwaiting, capsent, capwaiting;
} group;

static int push(struct bcast **v, size_t *n, size_t *cap, struct bcast b)
{
    if (sim_common_grow(v, *n, cap, sizeof **v, 16) != 0)
        return nccl_fail(NCCL_SYSTEM_ERROR, "ncclBroadcast: out of host memory");
    (*v)[(*n)++] = b;
    return NCCL_SUCCESS;
}

/* The communicator of a collective, checked with its type and operator
 * (op < 0: none), and count elements of type as *bytes; NULL with the last
 * error set, *code its result. */
static struct sim_nccl_comm *coll_comm(const char *who, void *comm, size_t count, int type,
                                       int op, size_t *bytes, int *code)
{
    struct sim_nccl_comm *c = nccl_comm_of(comm, who);
    *code = NCCL_INVALID_ARGUMENT;
    if (c == NULL)
        return NULL;
    if (c->state != COMM_LIVE) {
        *code = nccl_fail(NCCL_INVALID_USAGE, "%s: the communicator is %s", who,
                          c->state == COMM_FINALIZED ? "finalized"
                          : c->state == COMM_REVOKED ? "revoked"
                                                     : "suspended");
        return NULL;
    }
    if (type < 0 || type >= NCCL_NUM_TYPES) {
        nccl_fail(NCCL_INVALID_ARGUMENT, "%s: invalid data type %d", who, type);
        return NULL;
    }
    if (op != NO_OP && (op < 0 || op >= c->next_op)) {
        nccl_fail(NCCL_INVALID_ARGUMENT, "%s: invalid reduction operator %d", who, op);
        return NULL;
    }
    if (count > SIZE_MAX / type_bytes[type]) {
        nccl_fail(NCCL_INVALID_ARGUMENT, "%s: count %zu is too large", who, count);
        return NULL;
    }
    *bytes = count * type_bytes[type];
    *code = NCCL_SUCCESS;
    return c;
}

static int copy(const char *who, void *dst, const void *src, size_t bytes, cudaStream_t stream)
{
    if (dst == src || bytes == 0)
        return NCCL_SUCCESS;
    if (dst == NULL || src == NULL)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "%s: a buffer is NULL", who);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
        return nccl_fail(NCCL_UNHANDLED_CUDA_ERROR, "%s: cudaMemcpyAsync of %zu bytes failed: %s",
                         who, bytes, cudaGetErrorString(e));
    return NCCL_SUCCESS;
}

/* Every one of nslots slots of recv (each `bytes` long) := src. */
static int fill_slots(const char *who, void *recv, int nslots, const void *src, size_t bytes,
                      cudaStream_t stream)
{
    if (bytes != 0 && (size_t)nslots > SIZE_MAX / bytes)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "%s: %d slots of %zu bytes is too large", who,
                         nslots, bytes);
    for (int i = 0; i < nslots; i++) {
        int r = copy(who, (char *)recv + (size_t)i * bytes, src, bytes, stream);
        if (r != NCCL_SUCCESS)
            return r;
    }
    return NCCL_SUCCESS;
}

NCCL_API int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op,
                           void *comm, cudaStream_t stream)
{
    int r;
    size_t n = 0;
    if (coll_comm("ncclAllReduce", comm, count, type, op, &n, &r) == NULL)
        return r;
    return copy("ncclAllReduce", recv, send, n, stream);
}

NCCL_API int ncclBroadcast(const void *send, void *recv, size_t count, int type, int root,
                           void *comm, cudaStream_t stream)
{
    int r;
    size_t n = 0;
    struct sim_nccl_comm *c = coll_comm("ncclBroadcast", comm, count, type, NO_OP, &n, &r);
    if (c == NULL)
        return r;
    if (root < 0 || root >= c->nranks)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclBroadcast: root %d out of range", root);
    if (c->rank == root && group.depth > 0) {
        r = push(&group.sent, &group.nsent, &group.capsent,
                 (struct bcast){comm, root, send, NULL, n, stream});
        if (r != NCCL_SUCCESS)
            return r;
    }
    if (c->rank != root && (send == NULL || send == recv)) {
        if (group.depth == 0 || n == 0)
            return NCCL_SUCCESS;
        return push(&group.waiting, &group.nwaiting, &group.capwaiting,
                    (struct bcast){comm, root, NULL, recv, n, stream});
    }
    return copy("ncclBroadcast", recv, send, n, stream);
}

/* At the outermost ncclGroupEnd: the j-th waiting broadcast from a root
 * receives the j-th buffer this rank broadcast as root in the group, when
 * both have the same communicator and size. */
static int deliver(void)
{
    int r = NCCL_SUCCESS;
    for (size_t i = 0; i < group.nwaiting && r == NCCL_SUCCESS; i++) {
        struct bcast *w = &group.waiting[i];
        size_t j = 0;
        for (size_t k = 0; k < i; k++)
            j += group.waiting[k].comm == w->comm && group.waiting[k].root == w->root;
        for (size_t k = 0; k < group.nsent; k++) {
            struct bcast *s = &group.sent[k];
            if (s->comm != w->comm)
                continue;
            if (j-- == 0) {
                if (s->bytes == w->bytes)
                    r = copy("ncclGroupEnd", w->recv, s->send, w->bytes, w->stream);
                break;
            }
        }
    }
    group.nsent = group.nwaiting = 0;
    return r;
}

NCCL_API int ncclBcast(void *buff, size_t count, int type, int root, void *comm,
                       cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, type, root, comm, stream);
}

NCCL_API int ncclReduce(const void *send, void *recv, size_t count, int type, int op, int root,
                        void *comm, cudaStream_t stream)
{
    int r;
    size_t n = 0;
    struct sim_nccl_comm *c = coll_comm("ncclReduce", comm, count, type, op, &n, &r);
    if (c == NULL)
        return r;
    if (root < 0 || root >= c->nranks)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclReduce: root %d out of range", root);
    return c->rank == root ? copy("ncclReduce", recv, send, n, stream) : NCCL_SUCCESS;
}

NCCL_API int ncclAllGather(const void *send, void *recv, size_t sendcount, int type, void *comm,
                           cudaStream_t stream)
{
    int r;
    size_t n = 0;
    struct sim_nccl_comm *c = coll_comm("ncclAllGather", comm, sendcount, type, NO_OP, &n, &r);
    if (c == NULL)
        return r;
    return fill_slots("ncclAllGather", recv, c->nranks, send, n, stream);
}

NCCL_API int ncclReduceScatter(const void *send, void *recv, size_t recvcount, int type, int op,
                               void *comm, cudaStream_t stream)
{
    int r;
    size_t n = 0;
    struct sim_nccl_comm *c = coll_comm("ncclReduceScatter", comm, recvcount, type, op, &n, &r);
    if (c == NULL)
        return r;
    if (send == NULL && n != 0)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclReduceScatter: sendbuff is NULL");
    return copy("ncclReduceScatter", recv, (const char *)send + (size_t)c->rank * n, n, stream);
}

NCCL_API int ncclAlltoAll(const void *send, void *recv, size_t count, int type, void *comm,
                          cudaStream_t stream)
{
    int r;
    size_t n = 0;
    struct sim_nccl_comm *c = coll_comm("ncclAlltoAll", comm, count, type, NO_OP, &n, &r);
    if (c == NULL)
        return r;
    if (send == NULL && n != 0)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclAlltoAll: sendbuff is NULL");
    if (send == recv) /* in place: this rank's own block is already where it goes */
        return NCCL_SUCCESS;
    return fill_slots("ncclAlltoAll", recv, c->nranks, (const char *)send + (size_t)c->rank * n,
                      n, stream);
}

NCCL_API int ncclGather(const void *send, void *recv, size_t count, int type, int root,
                        void *comm, cudaStream_t stream)
{
    int r;
    size_t n = 0;
    struct sim_nccl_comm *c = coll_comm("ncclGather", comm, count, type, NO_OP, &n, &r);
    if (c == NULL)
        return r;
    if (root < 0 || root >= c->nranks)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclGather: root %d out of range", root);
    return c->rank == root ? fill_slots("ncclGather", recv, c->nranks, send, n, stream)
                           : NCCL_SUCCESS;
}

static int point_to_point(const char *who, size_t count, int type, int peer, void *comm)
{
    int r;
    size_t n = 0;
    struct sim_nccl_comm *c = coll_comm(who, comm, count, type, NO_OP, &n, &r);
    if (c == NULL)
        return r;
    if (peer < 0 || peer >= c->nranks)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "%s: peer %d out of range", who, peer);
    return NCCL_SUCCESS;
}

NCCL_API int ncclSend(const void *send, size_t count, int type, int peer, void *comm,
                      cudaStream_t stream)
{
    (void)send;
    (void)stream;
    return point_to_point("ncclSend", count, type, peer, comm);
}

NCCL_API int ncclRecv(void *recv, size_t count, int type, int peer, void *comm,
                      cudaStream_t stream)
{
    (void)recv;
    (void)stream;
    return point_to_point("ncclRecv", count, type, peer, comm);
}

/* A pre-multiplied sum: a new operator handle, valid on that communicator. */
NCCL_API int ncclRedOpCreatePreMulSum(int *op, void *scalar, int type, int residence, void *comm)
{
    (void)residence;
    NCCL_COMM(c, comm);
    if (op == NULL || scalar == NULL || type < 0 || type >= NCCL_NUM_TYPES)
        return nccl_fail(NCCL_INVALID_ARGUMENT, "ncclRedOpCreatePreMulSum: bad arguments");
    if (c->next_op == INT32_MAX)
        return nccl_fail(NCCL_INTERNAL_ERROR, "ncclRedOpCreatePreMulSum: out of operators");
    *op = c->next_op++;
    return NCCL_SUCCESS;
}

NCCL_API int ncclRedOpDestroy(int op, void *comm)
{
    NCCL_COMM(c, comm);
    if (op < NCCL_NUM_OPS || op >= c->next_op)
        return nccl_fail(NCCL_INVALID_ARGUMENT,
                         "ncclRedOpDestroy: %d is not an operator this communicator created", op);
    return NCCL_SUCCESS;
}

NCCL_API int ncclGroupStart(void)
{
    group.depth++;
    return NCCL_SUCCESS;
}

NCCL_API int ncclGroupEnd(void)
{
    if (group.depth == 0)
        return nccl_fail(NCCL_INVALID_USAGE, "ncclGroupEnd: no ncclGroupStart to end");
    return --group.depth == 0 ? deliver() : NCCL_SUCCESS;
}

/* ncclSimInfo_t's head and the time estimate: time is not simulated, 0 s. */
struct sim_info {
    size_t size;
    unsigned int magic, version;
    float estimated_time;
};

NCCL_API int ncclGroupSimulateEnd(struct sim_info *info)
{
    if (info == NULL || info->magic != SIM_INFO_MAGIC || info->size < sizeof *info)
        return nccl_fail(NCCL_INVALID_ARGUMENT,
                         "ncclGroupSimulateEnd: simInfo not made with NCCL_SIM_INFO_INITIALIZER");
    int r = ncclGroupEnd();
    if (r == NCCL_SUCCESS)
        info->estimated_time = 0.0f;
    return r;
}
