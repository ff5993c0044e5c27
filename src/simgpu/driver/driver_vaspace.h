/* driver_vaspace.h - the simulated GPU's memory: physical pages of one device
 * (struct driver_vaspace_pages) and ranges of virtual addresses
 * (struct driver_vaspace_range).  Pure data structures: no locking, no CUDA
 * semantics; driver*.c call them under the driver lock.
 */
#ifndef CUMEMTRACE_SIM_DRIVER_VASPACE_H
#define CUMEMTRACE_SIM_DRIVER_VASPACE_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* 2 MiB: the page size of current NVIDIA GPUs' large allocations, and the
 * granularity cuMemGetAllocationGranularity reports. */
#define SIM_PAGE (UINT64_C(2) << 20)
/* From 1 MiB on an allocation takes whole pages; smaller ones share pages.
 * The real driver switches to large pages around the same size. */
#define SIM_LARGE_MIN (UINT64_C(1) << 20)
/* Sub-allocation unit inside a shared page: keeps every pointer 512-byte
 * aligned, beyond cudaMalloc's documented 256. */
#define SIM_UNIT UINT64_C(512)
#define SIM_UNITS_PER_PAGE (SIM_PAGE / SIM_UNIT) /* 4096 */

enum driver_vaspace_state {
    VS_FREE = 0,  /* available */
    VS_RUN,       /* part of a contiguous large allocation */
    VS_SMALL,     /* carved into SIM_UNIT pieces */
    VS_SCATTER,   /* held by a placement that needs no contiguity */
    VS_RESERVED   /* taken by SIMCUDA_RESERVED (the context, other processes) */
};

/* A page carved into 4096 units of 512 bytes. */
struct driver_vaspace_small {
    uint64_t page;                            /* page index */
    uint32_t used;                            /* units in use; 0 returns the page */
    uint64_t bits[SIM_UNITS_PER_PAGE / 64];   /* bit set = unit in use */
};

/* The physical pages of one device.
 * Invariant: nfree + nreserved + pages held by placements == npages. */
struct driver_vaspace_pages {
    uint64_t npages;
    uint8_t *state;                       /* enum driver_vaspace_state per page */
    uint64_t nfree;                       /* pages in VS_FREE */
    uint64_t nreserved;                   /* pages in VS_RESERVED */
    struct driver_vaspace_small **small;  /* shared pages, sorted by page index */
    size_t nsmall, capsmall;
};

/* Where one allocation sits. */
struct driver_vaspace_block {
    enum { VB_NONE = 0, VB_RUN, VB_SMALL, VB_SCATTER } kind;
    uint64_t page;       /* VB_RUN: first page; VB_SMALL: the shared page */
    uint64_t npages;     /* VB_RUN, VB_SCATTER: pages held */
    uint32_t unit;       /* VB_SMALL: first unit */
    uint32_t units;      /* VB_SMALL: units held */
    uint64_t *pages;     /* VB_SCATTER: the page indices (malloc'd) */
};

/* Returns 0, or -1 when out of host memory. */
int driver_vaspace_pages_init(struct driver_vaspace_pages *p, uint64_t npages);

/* Places a linear allocation of `size` (> 0) bytes, first fit by address:
 * >= SIM_LARGE_MIN takes ceil(size / SIM_PAGE) contiguous pages, smaller
 * sizes take ceil(size / SIM_UNIT) contiguous units of a shared page (a new
 * page is shared only when no existing one has room).
 * Returns 0, -1 when no placement fits, -2 when out of host memory. */
int driver_vaspace_place(struct driver_vaspace_pages *p, uint64_t size,
                         struct driver_vaspace_block *b);

/* Takes `npages` (> 0) free pages wherever they are, lowest first: memory
 * that must be resident but needs no contiguous device addresses (managed,
 * VMM physical).  Returns 0, -1 when fewer pages are free, -2 on ENOMEM. */
int driver_vaspace_scatter(struct driver_vaspace_pages *p, uint64_t npages,
                           struct driver_vaspace_block *b);

/* Gives back what b holds and clears it.  VB_NONE is a no-op. */
void driver_vaspace_release(struct driver_vaspace_pages *p,
                            struct driver_vaspace_block *b);

/* Byte offset of a VB_RUN or VB_SMALL block from the start of the device. */
uint64_t driver_vaspace_offset(const struct driver_vaspace_block *b);

/* Marks up to `npages` of the highest free pages VS_RESERVED for good and
 * returns how many it took. */
uint64_t driver_vaspace_reserve_top(struct driver_vaspace_pages *p, uint64_t npages);

/* Returns up to `npages` VS_RESERVED pages, highest first, to VS_FREE and
 * returns how many it gave back. */
uint64_t driver_vaspace_unreserve_top(struct driver_vaspace_pages *p, uint64_t npages);

/* Pages held by placements (not free, not reserved). */
uint64_t driver_vaspace_used(const struct driver_vaspace_pages *p);

/* ---- virtual address ranges: a window [base, end) handing out spans ---- */

struct driver_vaspace_span {
    uint64_t start, size;
};

struct driver_vaspace_range {
    uint64_t base, end;
    struct driver_vaspace_span *span;  /* taken spans, sorted by start */
    size_t n, cap;
};

void driver_vaspace_range_init(struct driver_vaspace_range *r, uint64_t base, uint64_t end);

/* Takes `size` bytes aligned to `align` (a power of two): at `hint` when it
 * is non-zero, aligned and free, otherwise the lowest fitting address.
 * Returns 0 and *out, -1 when nothing fits, -2 when out of host memory. */
int driver_vaspace_range_alloc(struct driver_vaspace_range *r, uint64_t size,
                               uint64_t align, uint64_t hint, uint64_t *out);

/* Frees the span that starts at `start`; its size must be `size`.
 * Returns 0, or -1 when no such span was taken. */
int driver_vaspace_range_free(struct driver_vaspace_range *r, uint64_t start, uint64_t size);

/* Whether addr lies inside the window (taken or not). */
int driver_vaspace_range_covers(const struct driver_vaspace_range *r, uint64_t addr);

#pragma GCC visibility pop

#endif
