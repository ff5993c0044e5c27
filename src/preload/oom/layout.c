/* layout.c - where this process's live allocations sit on a device, for
 * the OOM post-mortem: the gaps between them and how they compare with the
 * request that failed (driver-level fragmentation).
 *
 * Only allocations the driver placed at an address of its choosing take
 * part: device (cudaMalloc, cuMemAlloc, pitched) and async (pool) memory.
 * Managed pages and VMM handles need no contiguity, and a VMM mapping's
 * address is a reservation the process chose, so neither can leave a hole.
 *
 * A gap is address space between two of our allocations that we do not
 * hold.  What no hook sees (the driver's own memory, a pool's cached blocks)
 * may sit in it, so a gap is the most a hole there can be; holes below the
 * lowest or above the highest allocation are not seen at all.  Both limits
 * are stated in docs/snapshot-format.md.
 *
 * Bounded output: every allocation up to LISTED_MAX; beyond that only those
 * that border the listed gaps, the first, the last and the one whose free
 * would open the largest hole.  Cost: a sort of the device's live ranges,
 * O(n log n), once per post-mortem write (OOM-rare).
 */
#include "layout.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "allocator_segments.h"
#include "record.h"

/* Enough to draw a fragmented device allocation by allocation (a 24 GiB
 * card cut into 2 MiB pieces has 12 k; the picture cannot show them all). */
#define LISTED_MAX 256
/* The largest gaps, named with their place: a few dozen say where the holes
 * are; the totals count the rest. */
#define GAPS_MAX 16

static int by_addr(const void *a, const void *b)
{
    const struct record_range *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct gap {
    uint64_t offset, bytes;
    size_t above; /* index of the allocation just above it */
};

/* The gap below allocation i (0 for the first, and for one overlapping its
 * predecessor - the driver never places two in one range, so that is only
 * a safeguard for handles we misread). */
static uint64_t gap_below(const struct record_range *v, size_t i, const uint64_t *end_max)
{
    return i > 0 && v[i].addr > end_max[i - 1] ? v[i].addr - end_max[i - 1] : 0;
}

static void keep_gap(struct gap *top, unsigned *ntop, struct gap g)
{
    if (*ntop == GAPS_MAX && top[GAPS_MAX - 1].bytes >= g.bytes)
        return;
    unsigned j = *ntop < GAPS_MAX ? (*ntop)++ : GAPS_MAX - 1;
    for (; j > 0 && top[j - 1].bytes < g.bytes; j--)
        top[j] = top[j - 1];
    top[j] = g;
}

static void write_alloc(struct snapshot_json *w, const struct record_range *r, uint64_t base,
                        bool comma)
{
    snapshot_json_printf(w, "%s{\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64
                            ",\"kind\":\"%s\",\"stack\":%u}",
                         comma ? "," : "", (uint64_t)r->addr - base, r->size,
                         record_kind_name(r->kind), r->stack);
}

static void write_layout(struct snapshot_json *w, struct record_range *v, size_t n,
                         uint64_t requested, uint64_t *end_max, bool *listed)
{
    qsort(v, n, sizeof *v, by_addr);
    uint64_t base = v[0].addr, bytes = 0, gap_bytes = 0, gap_count = 0, fit = 0;
    struct gap top[GAPS_MAX];
    unsigned ntop = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t end = v[i].addr + v[i].size;
        end_max[i] = i > 0 && end_max[i - 1] > end ? end_max[i - 1] : end;
        bytes += v[i].size;
        uint64_t g = gap_below(v, i, end_max);
        if (g > 0) {
            gap_count++;
            gap_bytes += g;
            fit += g >= requested;
            keep_gap(top, &ntop, (struct gap){end_max[i - 1] - base, g, i});
        }
    }
    /* The allocation whose free would open the largest hole: itself and the
     * gaps on both sides.  Among those that would open one large enough for
     * the request, the smallest (the least to give up), then the largest hole. */
    size_t best = n;
    uint64_t best_hole = 0;
    bool best_fits = false;
    for (size_t i = 0; i < n; i++) {
        uint64_t hole = gap_below(v, i, end_max) + v[i].size +
                        (i + 1 < n ? gap_below(v, i + 1, end_max) : 0);
        bool fits = hole >= requested;
        bool better = best == n ||
                      (fits && !best_fits) ||
                      (fits && best_fits && (v[i].size < v[best].size ||
                                               (v[i].size == v[best].size &&
                                                hole > best_hole))) ||
                      (!fits && !best_fits && hole > best_hole);
        if (better) {
            best = i;
            best_hole = hole;
            best_fits = fits;
        }
    }
    snapshot_json_printf(w, "{\"base\":\"0x%" PRIxPTR "\",\"span_bytes\":%" PRIu64
                            ",\"count\":%zu,\"bytes\":%" PRIu64 ",\"gap_count\":%" PRIu64
                            ",\"gap_bytes\":%" PRIu64 ",\"largest_gap_bytes\":%" PRIu64
                            ",\"gaps_at_least_request\":%" PRIu64 ",\n  \"allocations\":[",
                         v[0].addr, end_max[n - 1] - base, n, bytes, gap_count, gap_bytes,
                         ntop > 0 ? top[0].bytes : 0, fit);
    if (n <= LISTED_MAX) {
        for (size_t i = 0; i < n; i++)
            write_alloc(w, &v[i], base, i > 0);
    } else {
        memset(listed, 0, n * sizeof *listed);
        listed[0] = listed[n - 1] = listed[best] = true;
        for (unsigned g = 0; g < ntop; g++)
            listed[top[g].above] = listed[top[g].above - 1] = true;
        bool comma = false;
        for (size_t i = 0; i < n; i++)
            if (listed[i]) {
                write_alloc(w, &v[i], base, comma);
                comma = true;
            }
    }
    snapshot_json_s(w, "],\n  \"gaps\":[");
    for (unsigned g = 0; g < ntop; g++)
        snapshot_json_printf(w, "%s{\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
                             g ? "," : "", top[g].offset, top[g].bytes);
    snapshot_json_printf(w, "],\n  \"best_free\":{\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64
                            ",\"stack\":%u,\"hole_bytes\":%" PRIu64 "}",
                         (uint64_t)v[best].addr - base, v[best].size, v[best].stack, best_hole);
}

void layout_write(int device, uint64_t requested, int64_t allocator_tag,
                  struct snapshot_json *w)
{
    struct record_range *v = NULL;
    long n = device >= 0 ? record_live_ranges(device, &v) : -1;
    uint64_t *end_max = n > 0 ? malloc((size_t)n * sizeof *end_max) : NULL;
    bool *listed = n > LISTED_MAX ? malloc((size_t)n * sizeof *listed) : NULL;
    if (n < 0 || (n > 0 && end_max == NULL) || (n > LISTED_MAX && listed == NULL)) {
        snapshot_json_raw(w, "null", 4);
    } else {
        if (n == 0)
            snapshot_json_s(w, "{\"base\":null,\"span_bytes\":0,\"count\":0,\"bytes\":0,"
                               "\"gap_count\":0,\"gap_bytes\":0,\"largest_gap_bytes\":0,"
                               "\"gaps_at_least_request\":0,\"allocations\":[],\"gaps\":[],"
                               "\"best_free\":null");
        else
            write_layout(w, v, (size_t)n, requested, end_max, listed);
        snapshot_json_s(w, ",\n  \"allocator_segments\":");
        allocator_segments_write(device, allocator_tag, w);
        snapshot_json_raw(w, "}", 1);
    }
    free(listed);
    free(end_max);
    free(v);
}
