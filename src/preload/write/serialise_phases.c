/* serialise_phases.c - what the program's phases (phases.h) add to a
 * snapshot: per pool, the bytes each phase holds now and held at the
 * pool's peak, added up from the tracker's sites, which are keyed by phase
 * (record.h) - so the at-peak figures are exact, as for call sites; and
 * once per document the phases' names and the ranges the timeline draws.
 * Runs at dump time only. */
#include "serialise_phases.h"

#include <stdlib.h>
#include <string.h>

#include "phases.h"

/* Call sites listed under each phase, largest at the peak first. */
#define TOP_SITES 5

struct acc {
    uint64_t current, count, at_peak, at_peak_count, allocs, alloc_bytes;
    uint32_t top_stack[TOP_SITES];
    uint64_t top_bytes[TOP_SITES];
};

static void key_u64(struct snapshot_json *w, const char *key, uint64_t v)
{
    snapshot_json_s(w, key);
    snapshot_json_u64(w, v);
}

static void top_add(struct acc *a, uint32_t stack, uint64_t bytes)
{
    if (bytes == 0 || bytes <= a->top_bytes[TOP_SITES - 1])
        return;
    int i = TOP_SITES - 1;
    while (i > 0 && a->top_bytes[i - 1] < bytes) {
        a->top_bytes[i] = a->top_bytes[i - 1];
        a->top_stack[i] = a->top_stack[i - 1];
        i--;
    }
    a->top_bytes[i] = bytes;
    a->top_stack[i] = stack;
}

static const struct acc *order_base;

/* Largest at the peak first, then largest now, then by id. */
static int by_peak(const void *x, const void *y)
{
    uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    const struct acc *a = &order_base[i], *b = &order_base[j];
    if (a->at_peak != b->at_peak)
        return a->at_peak > b->at_peak ? -1 : 1;
    if (a->current != b->current)
        return a->current > b->current ? -1 : 1;
    return i < j ? -1 : i > j;
}

void serialise_phases_pool(struct snapshot_json *w, const struct record_view *v, uint32_t pool)
{
    if (v->phased == NULL)
        return;
    uint32_t n = phase_count() + 1;
    struct acc *acc = calloc(n, sizeof *acc);
    uint32_t *order = malloc(n * sizeof *order);
    /* first[p]..first[p + 1]: phase p's sites in `sites` (a counting sort) */
    uint32_t *first = calloc(n + 1, sizeof *first);
    uint32_t *sites = malloc((v->nphased ? v->nphased : 1) * sizeof *sites);
    uint32_t *fill = calloc(n, sizeof *fill);
    if (acc == NULL || order == NULL || first == NULL || sites == NULL || fill == NULL)
        goto out; /* the section is optional: absent reads as unknown */
    for (size_t i = 0; i < v->nphased; i++) {
        const struct record_site_view *s = &v->phased[i];
        if (s->pool != pool)
            continue;
        struct acc *a = &acc[s->phase < n ? s->phase : PHASE_OVERFLOW];
        a->current += s->current;
        a->count += s->count;
        a->at_peak += s->at_peak;
        a->at_peak_count += s->at_peak_count;
        a->allocs += s->allocs;
        a->alloc_bytes += s->alloc_bytes;
        top_add(a, s->stack ? s->stack->id : 0, s->at_peak);
    }
    for (size_t i = 0; i < v->nphased; i++)
        if (v->phased[i].pool == pool)
            first[(v->phased[i].phase < n ? v->phased[i].phase : PHASE_OVERFLOW) + 1]++;
    for (uint32_t p = 0; p < n; p++)
        first[p + 1] += first[p];
    for (size_t i = 0; i < v->nphased; i++) {
        if (v->phased[i].pool != pool)
            continue;
        uint32_t p = v->phased[i].phase < n ? v->phased[i].phase : PHASE_OVERFLOW;
        sites[first[p] + fill[p]++] = (uint32_t)i;
    }
    uint32_t m = 0;
    for (uint32_t p = 0; p < n; p++)
        if (acc[p].allocs != 0 || acc[p].current != 0 || acc[p].at_peak != 0)
            order[m++] = p;
    order_base = acc; /* dumps are serialised by the writer's lock */
    qsort(order, m, sizeof *order, by_peak);
    snapshot_json_s(w, ",\n \"by_phase\":[");
    for (uint32_t k = 0; k < m; k++) {
        const struct acc *a = &acc[order[k]];
        key_u64(w, k ? ",\n  {\"phase\":" : "\n  {\"phase\":", order[k]);
        key_u64(w, ",\"bytes\":", a->current);
        key_u64(w, ",\"count\":", a->count);
        key_u64(w, ",\"at_peak_bytes\":", a->at_peak);
        key_u64(w, ",\"at_peak_count\":", a->at_peak_count);
        key_u64(w, ",\"allocs\":", a->allocs);
        key_u64(w, ",\"bytes_allocated\":", a->alloc_bytes);
        snapshot_json_s(w, ",\"top_at_peak\":[");
        for (int t = 0; t < TOP_SITES && a->top_bytes[t] != 0; t++) {
            key_u64(w, t ? ",{\"stack\":" : "{\"stack\":", a->top_stack[t]);
            key_u64(w, ",\"bytes\":", a->top_bytes[t]);
            snapshot_json_s(w, "}");
        }
        snapshot_json_s(w, "],\"sites\":[");
        bool any = false;
        for (uint32_t k2 = first[order[k]]; k2 < first[order[k] + 1]; k2++) {
            const struct record_site_view *st = &v->phased[sites[k2]];
            if (st->allocs == 0 && st->current == 0 && st->at_peak == 0)
                continue;
            key_u64(w, any ? ",[" : "[", st->stack ? st->stack->id : 0);
            key_u64(w, ",", st->at_peak);
            key_u64(w, ",", st->current);
            key_u64(w, ",", st->allocs);
            key_u64(w, ",", st->alloc_bytes);
            snapshot_json_s(w, "]");
            any = true;
        }
        snapshot_json_s(w, "]}");
    }
    snapshot_json_s(w, "]");
out:
    free(fill);
    free(first);
    free(sites);
    free(acc);
    free(order);
}

static const char *const kind_names[] = {"push", "startend", "mark"};

void serialise_phases(struct snapshot_json *w)
{
    uint32_t n = phase_count();
    if (n == 0)
        return;
    struct phase_stats st;
    phase_get_stats(&st);
    key_u64(w, "\"phases\":{\"count\":", n);
    key_u64(w, ",\"pushes\":", st.pushes);
    key_u64(w, ",\"overflow\":", st.overflow);
    key_u64(w, ",\"unbalanced_pops\":", st.unbalanced_pops);
    key_u64(w, ",\"too_deep\":", st.too_deep);
    key_u64(w, ",\"dropped_starts\":", st.dropped_starts);
    snapshot_json_s(w, ",\n \"list\":[");
    for (uint32_t id = 1; id <= n; id++) {
        struct phase_info p;
        if (!phase_get(id, &p))
            break;
        key_u64(w, id > 1 ? ",\n  {\"id\":" : "\n  {\"id\":", id);
        key_u64(w, ",\"parent\":", p.parent);
        snapshot_json_s(w, ",\"name\":");
        snapshot_json_str(w, p.name);
        snapshot_json_s(w, ",\"source\":");
        snapshot_json_str(w, p.source);
        snapshot_json_s(w, ",\"domain\":");
        snapshot_json_str(w, p.domain); /* NULL: null */
        snapshot_json_s(w, "}");
    }
    struct phase_range *r = NULL;
    long nr = phase_ranges(&r);
    key_u64(w, "],\n \"ranges\":{\"recorded\":", st.recorded);
    key_u64(w, ",\"cap\":", PHASE_RING);
    snapshot_json_s(w, ",\"columns\":[\"start_ns\",\"end_ns\",\"thread\",\"phase\",\"kind\"],"
                       "\"data\":[");
    for (long i = 0; i < nr; i++) {
        snapshot_json_s(w, i ? ",\n [" : "\n [");
        snapshot_json_i64(w, r[i].start_ns);
        snapshot_json_s(w, ",");
        snapshot_json_i64_or_null(w, r[i].end_ns);
        key_u64(w, ",", r[i].tid);
        key_u64(w, ",", r[i].phase);
        snapshot_json_s(w, ",\"");
        snapshot_json_s(w, kind_names[r[i].kind < 3 ? r[i].kind : 0]);
        snapshot_json_s(w, "\"]");
    }
    free(r);
    snapshot_json_s(w, "]}},\n");
}
