/* rt_rank.c - one rank of a data-parallel job, started like torchrun does
 * (RANK, LOCAL_RANK, WORLD_SIZE in the environment), for the multi-rank
 * tests (tests/e2e/test_ranks.py).  Every rank builds the same "model"
 * (24 MiB), then runs steps whose activations grow with its rank (an
 * uneven batch): rank r holds 8 + 4r MiB of them at its peak.  With
 * RT_RANK_OOM=r that rank asks for more than the card has in its last step,
 * and exits 1 as a training script does on torch.OutOfMemoryError.  With
 * RT_RANK_GROW=r, rank r's activations take 4 MiB more (a regression). */
#include <stdio.h>
#include <stdlib.h>

#include "progs.h"

__attribute__((noinline)) void *build_model(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 24 * MiB), cudaSuccess);
    return p;
}

__attribute__((noinline)) int train_step(int rank, size_t extra)
{
    void *act;
    if (cudaMalloc(&act, (8 + 4 * (size_t)rank) * MiB + extra) != cudaSuccess)
        return -1;
    CHECK(cudaFree(act), cudaSuccess);
    return 0;
}

int main(void)
{
    const char *r = getenv("RANK"), *oom = getenv("RT_RANK_OOM");
    const char *grow = getenv("RT_RANK_GROW");
    if (r == NULL || getenv("LOCAL_RANK") == NULL || getenv("WORLD_SIZE") == NULL) {
        fprintf(stderr, "rt_rank: start me like torchrun (RANK, LOCAL_RANK, WORLD_SIZE)\n");
        return 2;
    }
    int rank = atoi(r);
    void *model = build_model();
    for (int step = 0; step < 3; step++) {
        size_t extra = oom && atoi(oom) == rank && step == 2 ? 1024 * MiB : 0;
        if (grow && atoi(grow) == rank)
            extra += 4 * MiB;
        if (train_step(rank, extra) != 0) {
            fprintf(stderr, "rank %d: out of memory in step %d\n", rank, step);
            return 1;
        }
    }
    CHECK(cudaFree(model), cudaSuccess);
    return 0;
}
