/* allocator.h - a caching allocator's own figures at its OOM, as the
 * post-mortem keeps them (cumemtrace_allocator_oom, life/torch_protocol.h). */
#ifndef CUMEMTRACE_ALLOCATOR_H
#define CUMEMTRACE_ALLOCATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"

#define ALLOCATOR_CONFIG_MAX 512
/* A post-mortem names the few lines that matter; 5 stacks of ~12 Python
 * frames fit, and 64 devices' latest states stay under 256 KiB. */
#define ALLOCATOR_TOP_TENSORS 5
#define ALLOCATOR_STACK_MAX 768

/* parameters, buffers, gradients, optimizer state, other tensors */
#define ALLOCATOR_ROLES 5

struct allocator_tensor_site {
    char stack[ALLOCATOR_STACK_MAX]; /* "file:line:function\n"..., innermost first */
    int64_t bytes, count;
};

struct allocator_facts {
    char name[32];
    char version[64];
    char config[ALLOCATOR_CONFIG_MAX]; /* as written, "" if none */
    int64_t requested, allocated, reserved, active, inactive_split;
    int64_t largest_free_small, largest_free_large;
    int64_t segments, num_alloc_retries, num_ooms, limit;
    int64_t device_total, device_free;
    int64_t peak_allocated; /* max_memory_allocated, -1 unknown */
    /* allocated split by the role of each live block's tensor (the caller
     * checked they sum to it); roles[0] -1: not measured. */
    int64_t roles[ALLOCATOR_ROLES];
    char optimizers[64]; /* "AdamW, SGD", "" for none */
    int64_t step, peak_step; /* training steps (life/torch_protocol.h), -1 */
    int64_t reported_ns; /* when the allocator reported them (ns since start) */
    int ntop; /* top[0..ntop); -1: the allocator keeps no history */
    struct allocator_tensor_site top[ALLOCATOR_TOP_TENSORS];
};

/* reserved - allocated, or -1 when either is unknown. */
int64_t allocator_unallocated(const struct allocator_facts *f);

/* The cause in the allocator's terms, or FORMAT_CAUSE_NONE when its
 * figures do not decide it (the driver-level cause stands):
 *   ALLOCATOR_LIMIT          its own cap refused the request;
 *   ALLOCATOR_FRAGMENTATION  reserved-but-unallocated >= the request, yet
 *                            no free block is large enough. */
enum format_cause allocator_cause(const struct allocator_facts *f);

struct cumemtrace_allocator_facts;
/* The caller's struct (life/torch_protocol.h) as ours; false when it
 * cannot be one (another size: said once) or recording is off. */
bool allocator_take(int device, const struct cumemtrace_allocator_facts *in,
                    struct allocator_facts *out);

/* The latest state cumemtrace_allocator_state reported for `device`: true
 * and *out filled when there is one. */
bool allocator_latest(int device, struct allocator_facts *out);

/* What became of the refresh of an allocator's figures asked for before a
 * dump (life/torch_layer.c), for that dump's document. */
struct allocator_refresh {
    bool asked;        /* a layer was there to ask */
    bool answered;     /* it reported within wait_ms */
    bool direct;       /* it ran on the dumping thread itself */
    int64_t asked_ns;  /* when it was asked */
    int64_t waited_ns; /* how long the dump waited for it */
    int64_t wait_ms;   /* the bound of that wait */
};

/* Notes the calling thread's refresh, for its next document. */
void allocator_refresh_note(const struct allocator_refresh *r);

/* The calling thread's noted refresh, once (later calls: none); false when
 * none was noted since. */
bool allocator_refresh_take(struct allocator_refresh *out);

#endif
