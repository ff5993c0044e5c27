/* html_flame.c - how many nodes the page's flame graph has (html.h).
 *
 * The page builds its icicle lazily, a node's children only when the node
 * is drawn wide enough to show them: for a 100 000-stack snapshot nearly
 * every node is narrower than a pixel and never built.  The number of
 * nodes, which the page reports beside what it drew, is counted here, on
 * the same paths: root, one node per device when there are several, then
 * each stack outermost frame first down to its CUDA entry point (a stack
 * of none is one "[no stack]" node), merged by frame index; PyTorch's
 * tensors (html_tview) by their group's frames alone.
 */
#include <stdlib.h>

#include "arena.h"
#include "hmap.h"
#include "html.h"

/* The groups the page draws for a mode on device track d, or NULL. */
static const struct snap_groups *mode_groups(const struct snapshot *s,
                                             const struct snap_device *d, int mode)
{
    switch (mode) {
    case HTML_FLAME_PEAK: return &d->at_peak;
    case HTML_FLAME_LIVE: return &d->live;
    default: return s->oom.present && s->oom.device == d->ordinal ? &s->oom.live : NULL;
    }
}

/* Adds one path under top: frames outermost first, then the entry point
 * (steps > nframes); none (a stack of none) is the one "[no stack]" step. */
static int add_path(struct hmap *map, uint32_t top, uint32_t *next, size_t steps, bool none,
                    const uint32_t *frames, uint32_t nframes, int32_t entry)
{
    uint32_t parent = top;
    for (size_t j = 0; j < steps; j++) {
        int32_t key[2];
        key[0] = (int32_t)parent;
        key[1] = none ? -1 : j < nframes ? (int32_t)frames[nframes - 1 - j] : entry;
        uint32_t id;
        if (hmap_get_or_add(map, key, sizeof key, *next, &id, NULL))
            return -1;
        if (id == *next)
            (*next)++;
        parent = id;
    }
    return 0;
}

int html_flame_nodes(const struct snapshot *s, const struct html_tview *tv,
                     const uint32_t *entry_of, int mode, uint64_t *nodes)
{
    size_t ndev = 0;
    for (size_t d = 0; d < s->ndevices; d++)
        ndev += s->devices[d].ordinal >= 0 && mode_groups(s, &s->devices[d], mode) != NULL;
    struct arena a;
    struct hmap map;
    arena_init(&a);
    hmap_init(&map, &a);
    uint32_t next = 1 + (uint32_t)(ndev > 1 ? ndev : 0);
    int rc = 0;
    size_t di = 0;
    for (size_t d = 0; rc == 0 && d < s->ndevices; d++) {
        const struct snap_groups *g = s->devices[d].ordinal >= 0
                                          ? mode_groups(s, &s->devices[d], mode) : NULL;
        if (g == NULL)
            continue;
        uint32_t top = ndev > 1 ? (uint32_t)(1 + di) : 0;
        di++;
        if (tv->on && tv->dev[d][mode].has) {
            /* PyTorch's tensors: each group's frames, no entry point */
            const struct html_tmode *tm = &tv->dev[d][mode];
            for (size_t i = 0; rc == 0 && i < tm->n; i++) {
                if (tm->v[i].bytes == 0)
                    continue;
                const struct html_tstack *ts = &tv->stacks[tm->v[i].stack - tv->base];
                rc = add_path(&map, top, &next, ts->nframes, false, html_tstack_frames(ts),
                              ts->nframes, 0);
            }
            continue;
        }
        for (size_t i = 0; rc == 0 && i < g->n; i++) {
            if (g->v[i].bytes == 0)
                continue;
            const struct snap_stack *st =
                g->v[i].stack != SNAP_NO_STACK ? &s->stacks[g->v[i].stack] : NULL;
            /* entry points told apart by name, as the page does */
            int32_t entry = st ? -2 - (int32_t)entry_of[g->v[i].stack] : -1;
            rc = add_path(&map, top, &next, st ? (size_t)st->nframes + 1 : 1, st == NULL,
                          st ? st->frames : NULL, st ? st->nframes : 0, entry);
        }
    }
    hmap_free(&map);
    arena_free(&a);
    *nodes = next;
    return rc;
}
