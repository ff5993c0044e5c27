/* sites.c - see sites.h. */
#include "sites.h"

#include <stdlib.h>
#include <string.h>

#include "frames.h"

void sites_init(struct sites_sum *sum, enum site_by by)
{
    memset(sum, 0, sizeof *sum);
    sum->by = by;
}

void sites_free(struct sites_sum *sum)
{
    free(sum->bytes);
    free(sum->count);
    free(sum->kinds);
    free(sum->touched);
    sites_init(sum, sum->by);
}

static int fit(struct sites_sum *sum, size_t id)
{
    if (id < sum->cap)
        return 0;
    size_t cap = sum->cap ? sum->cap : 64;
    while (cap <= id)
        cap *= 2;
    uint64_t *b = realloc(sum->bytes, cap * sizeof *b);
    if (b == NULL)
        return -1;
    sum->bytes = b;
    uint64_t *c = realloc(sum->count, cap * sizeof *c);
    if (c == NULL)
        return -1;
    sum->count = c;
    uint8_t *k = realloc(sum->kinds, cap);
    if (k == NULL)
        return -1;
    sum->kinds = k;
    memset(b + sum->cap, 0, (cap - sum->cap) * sizeof *b);
    memset(c + sum->cap, 0, (cap - sum->cap) * sizeof *c);
    memset(k + sum->cap, 0, cap - sum->cap);
    sum->cap = cap;
    return 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - 1 - b ? UINT64_MAX - 1 : a + b;
}

int sites_add(struct sites_sum *sum, struct snapshot *s, const struct snap_groups *g)
{
    for (size_t i = 0; i < g->n; i++) {
        const struct snap_group *e = &g->v[i];
        uint32_t id = frames_site(s, e->stack, sum->by);
        if (id == FRAMES_NONE || fit(sum, id) != 0)
            return -1;
        if (sum->bytes[id] == 0 && sum->count[id] == 0 && sum->kinds[id] == 0) {
            if (snapshot_vec_reserve((void **)&sum->touched, &sum->touched_cap,
                                     sizeof *sum->touched, sum->ntouched + 1))
                return -1;
            sum->touched[sum->ntouched++] = id;
        }
        /* Saturate rather than wrap: a hostile file must not make a huge
         * group look small. */
        sum->bytes[id] = sat_add(sum->bytes[id], e->bytes);
        sum->count[id] = sat_add(sum->count[id], e->count);
        sum->kinds[id] |= (uint8_t)(1u << (e->kind < 8 ? e->kind : 7));
        sum->total_bytes = sat_add(sum->total_bytes, e->bytes);
        sum->total_count = sat_add(sum->total_count, e->count);
    }
    return 0;
}

uint64_t sites_bytes(const struct sites_sum *sum, uint32_t id)
{
    return id < sum->cap ? sum->bytes[id] : 0;
}

uint64_t sites_count(const struct sites_sum *sum, uint32_t id)
{
    return id < sum->cap ? sum->count[id] : 0;
}

/* qsort has no context argument in C11; the comparison needs the sums and
 * the labels, so they are passed through file-level pointers set just
 * before the sort (the tool is single-threaded). */
static const struct sites_sum *sort_sum;
static const struct snapctx *sort_ctx;

static int by_bytes(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint64_t bx = sort_sum->bytes[x], by = sort_sum->bytes[y];
    if (bx != by)
        return bx < by ? 1 : -1;
    int c = strcmp(sort_ctx->sites[sort_sum->by][x].label,
                   sort_ctx->sites[sort_sum->by][y].label);
    if (c != 0)
        return c;
    return (x > y) - (x < y);
}

int sites_sum_sorted(struct sites_sum *sum, struct snapshot *s, const struct snap_groups *g)
{
    sites_init(sum, BY_STACK);
    if (sites_add(sum, s, g) != 0) {
        sites_free(sum);
        return -1;
    }
    /* largest first (ties: label): sum->touched itself, reordered */
    sort_sum = sum;
    sort_ctx = s->ctx;
    if (sum->ntouched > 1)
        qsort(sum->touched, sum->ntouched, sizeof *sum->touched, by_bytes);
    return 0;
}
