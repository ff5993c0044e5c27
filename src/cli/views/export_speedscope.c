/* export_speedscope.c - a snapshot as a speedscope file (export.h); its
 * profiles are docs/cli.md's `export` section.
 *
 * shared.frames holds every frame of the context (same index), then one a
 * range (after the context's, the source as its file), then the CUDA entry
 * points and the names of samples without a stack (entry_index), so a sample
 * is frame indexes, root first, as speedscope reads a sampled stack.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export.h"
#include "holders.h"
#include "json_out.h"
#include "snapshot_phases.h"

struct entries {
    const char **v;
    size_t n, cap;
    uint64_t *weights; /* the open profile's, one a sample in order */
    size_t nw, wcap;
};

static int entry_index(struct entries *e, const char *name, size_t *out)
{
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->v[i], name) == 0) {
            *out = i;
            return 0;
        }
    if (snapshot_vec_reserve((void **)&e->v, &e->cap, sizeof *e->v, e->n + 1))
        return -1;
    e->v[e->n] = name;
    *out = e->n++;
    return 0;
}

static uint64_t groups_sum(const struct snap_groups *g)
{
    uint64_t t = 0;
    for (size_t i = 0; i < g->n; i++)
        t += g->v[i].bytes;
    return t;
}

/* Opens a sampled profile of `total` bytes, up to its samples array. */
static void profile_open(struct json_out *w, struct entries *e, const char *name,
                         uint64_t total)
{
    e->nw = 0;
    json_out_begin_object(w);
    json_out_key_string(w, "type", "sampled");
    json_out_key_string(w, "name", name);
    json_out_key_string(w, "unit", "bytes");
    json_out_key_u64(w, "startValue", 0);
    json_out_key_u64(w, "endValue", total);
    json_out_key(w, "samples");
    json_out_begin_array(w);
}

/* Opens a sample with the frames in chain[0..n), root first. */
static void sample_open(struct json_out *w, const size_t *chain, size_t n)
{
    json_out_begin_array(w);
    for (size_t i = 0; i < n; i++)
        json_out_u64(w, chain[i]);
}

/* Closes a sample that weighs `bytes`; profile_close writes the weights. */
static int sample_close(struct json_out *w, struct entries *e, uint64_t bytes)
{
    json_out_end_array(w);
    if (snapshot_vec_reserve((void **)&e->weights, &e->wcap, sizeof *e->weights, e->nw + 1))
        return -1;
    e->weights[e->nw++] = bytes;
    return 0;
}

static void profile_close(struct json_out *w, const struct entries *e)
{
    json_out_end_array(w);
    json_out_key_u64s(w, "weights", true, NULL, e->weights, e->nw);
    json_out_end_object(w);
}

/* One sample of `bytes`: the frames in chain[0..n) (root first), then the
 * stack's frames outermost first, then its entry (an index after `base`). */
static int stack_sample(struct json_out *w, const struct snapshot *s, struct entries *e,
                        const size_t *chain, size_t n, uint32_t stack, size_t base,
                        uint64_t bytes)
{
    const struct snap_stack *st = stack != SNAP_NO_STACK ? &s->stacks[stack] : NULL;
    size_t leaf;
    if (entry_index(e, st ? st->entry : "[no stack]", &leaf) != 0)
        return -1;
    sample_open(w, chain, n);
    for (uint32_t k = st ? st->nframes : 0; k > 0; k--)
        json_out_u64(w, st->frames[k - 1]);
    json_out_u64(w, base + leaf);
    return sample_close(w, e, bytes);
}

static int profile(struct json_out *w, const struct snapshot *s, struct entries *e,
                   const char *name, const struct snap_groups *g)
{
    uint64_t total = groups_sum(g);
    if (total == 0)
        return 0;
    size_t nframes = s->ctx->nframes + s->phases.n; /* entries come after both */
    profile_open(w, e, name, total);
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].bytes != 0 &&
            stack_sample(w, s, e, NULL, 0, g->v[i].stack, nframes, g->v[i].bytes) != 0)
            return -1;
    profile_close(w, e);
    return 0;
}

/* One sample of `bytes`, a name alone (an entry after `base`). */
static int name_sample(struct json_out *w, struct entries *e, const char *name, size_t base,
                       uint64_t bytes)
{
    size_t leaf;
    if (name == NULL || entry_index(e, name, &leaf) != 0)
        return -1;
    json_out_begin_array(w);
    json_out_u64(w, base + leaf);
    return sample_close(w, e, bytes);
}

/* PyTorch's tensors of one moment (holders_tensors): a sample a group,
 * then the folded tail and the cache; weights in the same order. */
static int profile_tensors(struct json_out *w, struct snapshot *s, struct entries *e,
                           const char *name, const struct snap_tensors *t)
{
    bool cache = t->has_cache && t->cache_bytes != SNAP_UNKNOWN && t->cache_bytes > 0;
    bool more = t->has_more && t->more_bytes > 0;
    uint64_t total = (cache ? t->cache_bytes : 0) + (more ? t->more_bytes : 0);
    for (size_t i = 0; i < t->n; i++)
        total += t->v[i].bytes;
    if (total == 0)
        return 0;
    size_t base = s->ctx->nframes + s->phases.n;
    char text[64];
    snprintf(text, sizeof text, "[%" PRIu64 " more lines]", t->more_groups);
    const char *more_name = snapshot_intern(s->ctx, text, strlen(text));
    profile_open(w, e, name, total);
    for (size_t i = 0; i < t->n; i++) {
        const struct snap_tgroup *g = &t->v[i];
        if (g->bytes == 0)
            continue;
        if (g->nframes == 0) {
            if (name_sample(w, e, holders_group_name(s, g, false), base, g->bytes) != 0)
                return -1;
            continue;
        }
        sample_open(w, NULL, 0);
        for (uint32_t k = g->nframes; k > 0; k--)
            json_out_u64(w, g->frames[k - 1]);
        if (sample_close(w, e, g->bytes) != 0)
            return -1;
    }
    if ((more && name_sample(w, e, more_name, base, t->more_bytes) != 0) ||
        (cache && name_sample(w, e, "[PyTorch's cache]", base, t->cache_bytes) != 0))
        return -1;
    profile_close(w, e);
    return 0;
}

/* A moment's profile: PyTorch's tensors when the file has them (and
 * --segments is not given), else the driver's groups g. */
static int profile_moment(struct json_out *w, struct snapshot *s, struct entries *e,
                          const char *name, const struct snap_device *d,
                          enum holders_moment m, const struct snap_groups *g)
{
    const struct snap_tensors *t = holders_tensors(s, d, m);
    if (t != NULL && t->present)
        return profile_tensors(w, s, e, name, t);
    return profile(w, s, e, name, g);
}

/* Frame indexes of phase id's path, root first, into chain (at most
 * RANGE_DEPTH); the number written. */
#define RANGE_DEPTH 64
static size_t range_chain(const struct snapshot *s, int64_t id, size_t *chain)
{
    size_t n = 0, rev[RANGE_DEPTH];
    for (const struct snap_phase *ph = snapshot_phase(s, id); ph != NULL && n < RANGE_DEPTH;
         ph = snapshot_phase(s, ph->parent))
        rev[n++] = s->ctx->nframes + (size_t)(ph - s->phases.v);
    for (size_t i = 0; i < n; i++)
        chain[i] = rev[n - 1 - i];
    return n;
}

/* The peak by range: each range of rows (by_phase) as frames above the call
 * sites that held its bytes at the peak (top_at_peak), and the rest of the
 * range's bytes under "(other call sites)"; weights sum to peak_bytes, as
 * the range table's at_peak_bytes do. */
static int profile_by_range(struct json_out *w, const struct snapshot *s, struct entries *e,
                            const char *name, const struct snap_phase_rows *rows)
{
    uint64_t total = 0;
    for (size_t i = 0; i < rows->n; i++)
        total += rows->v[i].at_peak_bytes;
    if (!rows->present || total == 0)
        return 0;
    size_t base = s->ctx->nframes + s->phases.n, chain[RANGE_DEPTH + 1];
    size_t outside, other;
    if (entry_index(e, "(outside every range)", &outside) != 0 ||
        entry_index(e, "(other call sites)", &other) != 0)
        return -1;
    profile_open(w, e, name, total);
    for (size_t i = 0; i < rows->n; i++) {
        const struct snap_phase_row *r = &rows->v[i];
        if (r->at_peak_bytes == 0)
            continue;
        size_t n = range_chain(s, r->phase, chain);
        if (n == 0)
            chain[n++] = base + outside;
        uint64_t listed = 0;
        for (size_t k = 0; k < r->ntop; k++) {
            const struct snap_group *g = &r->top[k];
            if (g->bytes == 0 || listed + g->bytes > r->at_peak_bytes)
                continue;
            listed += g->bytes;
            if (stack_sample(w, s, e, chain, n, g->stack, base, g->bytes) != 0)
                return -1;
        }
        if (listed < r->at_peak_bytes) {
            sample_open(w, chain, n);
            json_out_u64(w, base + other);
            if (sample_close(w, e, r->at_peak_bytes - listed) != 0)
                return -1;
        }
    }
    profile_close(w, e);
    return 0;
}

int export_speedscope(FILE *f, struct snapshot *s)
{
    struct entries e = {NULL, 0, 0, NULL, 0, 0};
    struct json_out w;
    char name[128];
    json_out_init(&w, f, false);
    w.break_depth = 2; /* one profile per line */
    json_out_begin_object(&w);
    json_out_key_string(&w, "$schema", "https://www.speedscope.app/file-format-schema.json");
    json_out_key_string(&w, "exporter", "cumemtrace " CUMEMTRACE_CLI_VERSION);
    snprintf(name, sizeof name, "cumemtrace: %s (pid %" PRId64 ")",
             s->process.exe ? s->process.exe : "?", s->process.pid);
    json_out_key_string(&w, "name", name);
    json_out_key_u64(&w, "activeProfileIndex", 0);
    json_out_key(&w, "profiles");
    json_out_begin_array(&w);
    int rc = 0;
    for (size_t d = 0; d < s->ndevices && rc == 0; d++) {
        const struct snap_device *dv = &s->devices[d];
        snprintf(name, sizeof name, "device %" PRId64 " at peak", dv->ordinal);
        rc |= profile_moment(&w, s, &e, name, dv, HOLDERS_PEAK, &dv->at_peak);
        snprintf(name, sizeof name, "device %" PRId64 " at peak, by range", dv->ordinal);
        rc |= profile_by_range(&w, s, &e, name, &dv->by_phase);
        snprintf(name, sizeof name, "device %" PRId64 " live at dump", dv->ordinal);
        rc |= profile_moment(&w, s, &e, name, dv, HOLDERS_NOW, &dv->live);
        if (snapshot_is_oom(s) && s->oom.device == dv->ordinal) {
            snprintf(name, sizeof name, "device %" PRId64 " at the OOM", dv->ordinal);
            rc |= profile_moment(&w, s, &e, name, NULL, HOLDERS_OOM, &s->oom.live);
        }
    }
    if (rc == 0 && s->host.present) {
        rc |= profile(&w, s, &e, "host pinned at peak", &s->host.at_peak);
        rc |= profile_by_range(&w, s, &e, "host pinned at peak, by range", &s->host.by_phase);
        rc |= profile(&w, s, &e, "host pinned live at dump", &s->host.live);
    }
    json_out_end_array(&w);
    json_out_key(&w, "shared");
    json_out_begin_object(&w);
    json_out_key(&w, "frames");
    json_out_begin_array(&w);
    for (size_t i = 0; i < s->ctx->nframes; i++) {
        const struct frame *fr = &s->ctx->frames[i];
        json_out_begin_object(&w);
        json_out_key_string(&w, "name", fr->name);
        if (fr->module != NULL) {
            json_out_key_string(&w, "file", fr->module);
        }
        json_out_end_object(&w);
    }
    for (size_t i = 0; i < s->phases.n; i++) {
        json_out_begin_object(&w);
        json_out_key_string(&w, "name", s->phases.v[i].name);
        json_out_key_string(&w, "file", s->phases.v[i].source);
        json_out_end_object(&w);
    }
    for (size_t i = 0; i < e.n; i++) {
        json_out_begin_object(&w);
        json_out_key_string(&w, "name", e.v[i]);
        json_out_end_object(&w);
    }
    json_out_end_array(&w);
    json_out_end_object(&w);
    json_out_end_object(&w);
    json_out_finish(&w);
    free(e.v);
    free(e.weights);
    return rc ? -1 : 0;
}
