/* train_sim.c - a training loop's memory behaviour, on any CUDA runtime:
 * weights, optimizer state, per-layer activations that grow with the batch
 * size, gradients, and a PyTorch-style caching allocator that frees its
 * cache and retries when cudaMalloc fails.  `make demo-c` runs it under
 * cumemtrace on the simulated GPU; it runs unchanged on a real one.
 *
 *   train_sim [--batch N] [--steps N] [--layers N] [--hidden N]
 *
 * Exits 1 with a torch-like "CUDA out of memory" message when a step does
 * not fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"

#define MiB (1024ull * 1024)
#define MAX_BLOCKS 4096

/* ---- a small caching allocator, as PyTorch's (DESIGN.md) ---- */

struct block {
    void *ptr;
    size_t size;
    int free;
};
static struct block blocks[MAX_BLOCKS];
static int nblocks;

static size_t round_request(size_t n)
{
    if (n <= 1 * MiB)
        return 2 * MiB; /* small pool segment */
    if (n <= 10 * MiB)
        return 20 * MiB;
    return (n + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
}

static void empty_cache(void)
{
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].ptr != NULL && blocks[i].free) {
            cudaFree(blocks[i].ptr);
            blocks[i].ptr = NULL;
        }
}

static void *tensor_alloc(size_t n)
{
    size_t size = round_request(n);
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].ptr && blocks[i].free && blocks[i].size == size) {
            blocks[i].free = 0;
            return blocks[i].ptr;
        }
    void *p;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        cudaGetLastError();
        empty_cache(); /* release cached blocks, retry once */
        if (cudaMalloc(&p, size) != cudaSuccess) {
            cudaGetLastError();
            size_t f = 0, t = 0;
            cudaMemGetInfo(&f, &t);
            fprintf(stderr, "train_sim: CUDA out of memory. Tried to allocate "
                            "%.2f GiB. GPU 0 has a total capacity of %.2f GiB "
                            "of which %.2f GiB is free.\n",
                    size / 1073741824.0, t / 1073741824.0, f / 1073741824.0);
            exit(1);
        }
    }
    int slot = nblocks;
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].ptr == NULL) {
            slot = i;
            break;
        }
    if (slot == nblocks && nblocks++ == MAX_BLOCKS)
        exit(3);
    blocks[slot] = (struct block){p, size, 0};
    return p;
}

static void tensor_free(void *p)
{
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].ptr == p)
            blocks[i].free = 1;
}

/* ---- the model: distinct functions so call sites are distinct ---- */

struct layer {
    void *weight, *grad, *adam_m, *adam_v, *act;
};

/* Exported (built with -rdynamic) so stacks name them without debug info. */
void model_init_weights(struct layer *l, size_t bytes);
void optimizer_init_state(struct layer *l, size_t bytes);
void forward_layer(struct layer *l, size_t act_bytes);
void backward_layer(struct layer *l, size_t bytes);
void optimizer_step(struct layer *l);
void *load_batch_pinned(size_t bytes);

__attribute__((noinline)) void model_init_weights(struct layer *l, size_t bytes)
{
    l->weight = tensor_alloc(bytes);
}

__attribute__((noinline)) void optimizer_init_state(struct layer *l, size_t bytes)
{
    l->adam_m = tensor_alloc(bytes);
    l->adam_v = tensor_alloc(bytes);
}

__attribute__((noinline)) void forward_layer(struct layer *l, size_t act_bytes)
{
    l->act = tensor_alloc(act_bytes); /* saved for backward */
}

__attribute__((noinline)) void backward_layer(struct layer *l, size_t bytes)
{
    l->grad = tensor_alloc(bytes);
    tensor_free(l->act);
}

__attribute__((noinline)) void optimizer_step(struct layer *l)
{
    tensor_free(l->grad);
}

__attribute__((noinline)) void *load_batch_pinned(size_t bytes)
{
    void *p;
    if (cudaMallocHost(&p, bytes) != cudaSuccess)
        exit(1);
    return p;
}

int main(int argc, char **argv)
{
    int batch = 8, steps = 3, layers = 24;
    size_t hidden = 4096;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--layers") == 0)
            layers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--hidden") == 0)
            hidden = strtoull(argv[i + 1], NULL, 10);
    }
    if (batch <= 0 || steps <= 0 || layers <= 0 || layers > 256 || hidden == 0) {
        fprintf(stderr, "usage: train_sim [--batch N] [--steps N] [--layers N] "
                        "[--hidden N]\n");
        return 2;
    }
    struct layer *model = calloc((size_t)layers, sizeof *model);
    size_t wbytes = hidden * hidden * 4;          /* fp32 weights */
    size_t abytes = (size_t)batch * 2048 * hidden * 2; /* bf16, seq 2048 */
    for (int l = 0; l < layers; l++)
        model_init_weights(&model[l], wbytes);
    for (int l = 0; l < layers; l++)
        optimizer_init_state(&model[l], wbytes);
    void *staging = load_batch_pinned(64 * MiB);
    for (int s = 0; s < steps; s++) {
        for (int l = 0; l < layers; l++)
            forward_layer(&model[l], abytes);
        for (int l = layers - 1; l >= 0; l--)
            backward_layer(&model[l], wbytes);
        for (int l = 0; l < layers; l++)
            optimizer_step(&model[l]);
        printf("step %d done (batch %d)\n", s + 1, batch);
    }
    cudaFreeHost(staging);
    free(model);
    return 0;
}
