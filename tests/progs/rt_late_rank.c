/* rt_late_rank.c - sets RANK itself before its first CUDA call, as a
 * torch.multiprocessing.spawn child does (os.environ["RANK"] = ...) after
 * the library has loaded; tests/e2e/test_late_rank.py. */
#include <stdlib.h>

#include "progs.h"

int main(void)
{
    void *p;
    CHECK(setenv("RANK", "5", 1), 0);
    CHECK(cudaMalloc(&p, 4 * MiB), cudaSuccess);
    CHECK(cudaFree(p), cudaSuccess);
    return 0;
}
