/* report_churn.c - which call sites allocate and free over and over.
 *
 * A caching allocator that thrashes (cudaMalloc/cudaFree every step, after
 * empty_cache() or on fragmentation) is invisible in "at peak" and "live"
 * tables: what it holds at any moment is small.  Counted per call site it
 * stands out; the cost line prices the pairs at the public 20-100 us of a
 * cudaMalloc+cudaFree pair on a real GPU (docs/design.md, "Facts"). */
#include "report_churn.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "out.h"

int churn_sort_parse(const char *name)
{
    if (strcmp(name, "allocs") == 0)
        return CHURN_BY_ALLOCS;
    if (strcmp(name, "bytes") == 0)
        return CHURN_BY_BYTES;
    if (strcmp(name, "temporary") == 0)
        return CHURN_BY_TEMPORARY;
    return -1;
}

struct row {
    uint32_t site, stack;
    uint64_t allocs, frees, bytes, temporary;
};

static enum churn_sort sort_by;

static uint64_t key(const struct row *r)
{
    return sort_by == CHURN_BY_BYTES       ? r->bytes
           : sort_by == CHURN_BY_TEMPORARY ? r->temporary
                                           : r->allocs;
}

static int by_key(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (key(x) != key(y))
        return key(x) > key(y) ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

int report_churn(FILE *f, struct snapshot *s, const struct snap_device *d,
                 enum churn_sort by, unsigned top)
{
    const struct snap_groups *g = &d->churn;
    uint64_t frees = 0, allocs = 0, temporary = 0;
    for (size_t i = 0; i < g->n; i++) {
        frees += g->v[i].frees;
        allocs += g->v[i].count;
        temporary += g->v[i].temporary;
    }
    if (frees == 0)
        return 0;
    /* One row per call site as the other tables name them.  Site ids are
     * dense (frames_site numbers them as it meets them), so a row is found
     * by indexing, not by searching the rows: linear in the groups. */
    struct row *rows = calloc(g->n, sizeof *rows);
    uint32_t *sites = malloc((g->n ? g->n : 1) * sizeof *sites);
    uint32_t *row_of = NULL; /* site id -> row + 1, 0 for none yet */
    if (rows == NULL || sites == NULL)
        goto fail;
    for (size_t i = 0; i < g->n; i++)
        if ((sites[i] = frames_site(s, g->v[i].stack, BY_STACK)) == FRAMES_NONE)
            goto fail;
    row_of = calloc(s->ctx->nsites[BY_STACK] + 1, sizeof *row_of);
    if (row_of == NULL)
        goto fail;
    size_t n = 0;
    for (size_t i = 0; i < g->n; i++) {
        uint32_t site = sites[i];
        if (row_of[site] == 0) {
            rows[n++] = (struct row){site, g->v[i].stack, 0, 0, 0, 0};
            row_of[site] = (uint32_t)n;
        }
        struct row *r = &rows[row_of[site] - 1];
        r->allocs += g->v[i].count;
        r->frees += g->v[i].frees;
        r->bytes += g->v[i].bytes;
        r->temporary += g->v[i].temporary;
    }
    free(sites);
    free(row_of);
    sites = row_of = NULL;
    sort_by = by;
    qsort(rows, n, sizeof *rows, by_key);
    static const char *const names[] = {"allocations", "bytes allocated", "temporary"};
    char lo[OUT_NUM], hi[OUT_NUM];
    /* 20-100 us per pair: 20000-100000 ns. */
    /* Wrapped like every line of the report: --width holds for headings too. */
    char line[256];
    snprintf(line, sizeof line, "Churn over the run by %s: %" PRIu64 " allocation%s, %" PRIu64
             " free%s (%" PRIu64 " temporary)",
             names[by], allocs, allocs == 1 ? "" : "s", frees, frees == 1 ? "" : "s",
             temporary);
    out_wrap(f, "  ", "    ", line);
    uint64_t win = s->config.temporary_ms;
    if (win > 0 && win < UINT64_MAX / 1000000u) {
        char w[OUT_NUM];
        snprintf(line, sizeof line, "temporary: freed before the next allocation, or within "
                 "%s (CUMEMTRACE_TEMPORARY)", out_duration((int64_t)(win * 1000000u), w));
        out_wrap(f, "    ", "      ", line);
    }
    char cost[256];
    snprintf(cost, sizeof cost, "on a real GPU %" PRIu64 " alloc+free %s about %s to "
             "%s of API time (20-100 us a pair)",
             frees, frees == 1 ? "pair costs" : "pairs cost", out_duration((int64_t)(frees * 20000), lo),
             out_duration((int64_t)(frees * 100000), hi));
    out_wrap(f, "    ", "      ", cost);
    struct out_table t;
    out_table_init(&t, "rrrrl", 2);
    out_table_row(&t, "allocs", "frees", "temporary", "allocated", "call site");
    for (size_t i = 0; i < n && i < top; i++) {
        char a[32], fr[32], tm[32], b[OUT_NUM];
        snprintf(a, sizeof a, "%" PRIu64, rows[i].allocs);
        snprintf(fr, sizeof fr, "%" PRIu64, rows[i].frees);
        snprintf(tm, sizeof tm, "%" PRIu64, rows[i].temporary);
        out_table_row(&t, a, fr, tm, out_bytes(rows[i].bytes, b),
                      frames_site_get(s->ctx, BY_STACK, rows[i].site)->display);
    }
    if (n > top) {
        char more[64];
        snprintf(more, sizeof more, "(%zu more call sites)", n - top);
        out_table_row(&t, "", "", "", "", more);
    }
    free(rows);
    return out_table_print(&t, f);
fail:
    free(rows);
    free(sites);
    free(row_of);
    return -1;
}
