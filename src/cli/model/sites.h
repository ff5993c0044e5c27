/* sites.h - sum allocation groups by call site (see frames.h for what a
 * site is).  Snapshots loaded into one snapctx share site ids, so sums of
 * two files line up index by index: that is how diff pairs call sites. */
#ifndef CUMEMTRACE_CLI_SITES_H
#define CUMEMTRACE_CLI_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* Per-site sums, indexed by site id; grows as sites appear. */
struct sites_sum {
    enum site_by by;
    uint64_t *bytes;
    uint64_t *count;
    uint8_t *kinds;     /* bit per enum snap_kind seen */
    size_t cap;
    uint32_t *touched;  /* site ids with a non-zero entry, first-seen order */
    size_t ntouched, touched_cap;
    uint64_t total_bytes, total_count;
};

void sites_init(struct sites_sum *sum, enum site_by by);
void sites_free(struct sites_sum *sum);

/* Adds every group of g (stacks of s) to the sums; -1 on OOM. */
int sites_add(struct sites_sum *sum, struct snapshot *s, const struct snap_groups *g);

/* Bytes of site id (0 when never added). */
uint64_t sites_bytes(const struct sites_sum *sum, uint32_t id);
uint64_t sites_count(const struct sites_sum *sum, uint32_t id);

/* The groups of g summed by whole stack, the touched ids sorted by bytes
 * (largest first, ties: label): what report, report --json and the advice
 * list.  Returns 0,
 * or -1 when out of memory (sum then freed); the caller frees sum. */
int sites_sum_sorted(struct sites_sum *sum, struct snapshot *s, const struct snap_groups *g);

#endif
