/* html_flame.c - how many nodes the page's flame graph has (html.h).
 *
 * The page builds its icicle lazily, a node's children only when the node
 * is drawn wide enough to show them: for a 100 000-stack snapshot nearly
 * every node is narrower than a pixel and never built.  The number of
 * nodes, which the page reports beside what it drew, is counted here, on
 * the same paths: root, one node per device when there are several, then
 * each stack outermost frame first down to its CUDA entry point (a stack
 * of none is one "[no stack]" node), merged by frame index.
 */
#include <stdlib.h>
#include <string.h>

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

int html_flame_nodes(const struct snapshot *s, int mode, uint64_t *nodes)
{
    size_t ndev = 0;
    for (size_t d = 0; d < s->ndevices; d++)
        ndev += s->devices[d].ordinal >= 0 && mode_groups(s, &s->devices[d], mode) != NULL;
    /* entry points, told apart by name as the page does */
    const char **entries = NULL;
    size_t nentries = 0, cap = 0;
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
        for (size_t i = 0; rc == 0 && i < g->n; i++) {
            if (g->v[i].bytes == 0)
                continue;
            const struct snap_stack *st =
                g->v[i].stack != SNAP_NO_STACK ? &s->stacks[g->v[i].stack] : NULL;
            size_t steps = st ? (size_t)st->nframes + 1 : 1;
            int32_t entry = -1;
            if (st) {
                const char *e = st->entry ? st->entry : "unknown";
                size_t k;
                for (k = 0; k < nentries && strcmp(entries[k], e) != 0; k++)
                    ;
                if (k == nentries) {
                    if (snapshot_vec_reserve((void **)&entries, &cap, sizeof *entries,
                                             nentries + 1)) {
                        rc = -1;
                        break;
                    }
                    entries[nentries++] = e;
                }
                entry = -2 - (int32_t)k;
            }
            uint32_t parent = top;
            for (size_t j = 0; j < steps; j++) {
                int32_t key[2];
                key[0] = (int32_t)parent;
                key[1] = !st ? -1 : j < st->nframes ? (int32_t)st->frames[st->nframes - 1 - j]
                                                    : entry;
                uint32_t id;
                if (hmap_get_or_add(&map, key, sizeof key, next, &id, NULL)) {
                    rc = -1;
                    break;
                }
                if (id == next)
                    next++;
                parent = id;
            }
        }
    }
    free(entries);
    hmap_free(&map);
    arena_free(&a);
    *nodes = next;
    return rc;
}
