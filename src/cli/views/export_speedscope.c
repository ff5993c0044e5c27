/* export_speedscope.c - a snapshot as a speedscope file (export.h).
 *
 * shared.frames holds every frame of the context (same index) followed by
 * the CUDA entry points, so a sample is the stack's frames reversed (root
 * first, as speedscope reads a sampled stack) and its entry point as the
 * leaf; the weight is the group's bytes.  Profiles, each only when it has
 * bytes: per device "at peak" (at_peak, sums to peak_bytes), "live at dump"
 * and, for the failing device of a post-mortem, "at the OOM"; the same for
 * pinned host memory (no OOM).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export.h"
#include "json_out.h"

struct entries {
    const char **v;
    size_t n, cap;
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

static int profile(struct json_out *w, const struct snapshot *s, struct entries *e,
                   const char *name, const struct snap_groups *g)
{
    uint64_t total = groups_sum(g);
    if (total == 0)
        return 0;
    size_t nframes = s->ctx->nframes;
    json_out_begin_object(w);
    json_out_key(w, "type");
    json_out_string(w, "sampled");
    json_out_key(w, "name");
    json_out_string(w, name);
    json_out_key(w, "unit");
    json_out_string(w, "bytes");
    json_out_key(w, "startValue");
    json_out_u64(w, 0);
    json_out_key(w, "endValue");
    json_out_u64(w, total);
    json_out_key(w, "samples");
    json_out_begin_array(w);
    for (size_t i = 0; i < g->n; i++) {
        if (g->v[i].bytes == 0)
            continue;
        json_out_begin_array(w);
        const struct snap_stack *st = g->v[i].stack != SNAP_NO_STACK ? &s->stacks[g->v[i].stack]
                                                                    : NULL;
        size_t leaf;
        if (entry_index(e, st ? st->entry : "[no stack]", &leaf) != 0)
            return -1;
        for (uint32_t k = st ? st->nframes : 0; k > 0; k--)
            json_out_u64(w, st->frames[k - 1]);
        json_out_u64(w, nframes + leaf);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_key(w, "weights");
    json_out_begin_array(w);
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].bytes != 0)
            json_out_u64(w, g->v[i].bytes);
    json_out_end_array(w);
    json_out_end_object(w);
    return 0;
}

int export_speedscope(FILE *f, struct snapshot *s)
{
    struct entries e = {NULL, 0, 0};
    struct json_out w;
    char name[128];
    json_out_init(&w, f, false);
    w.break_depth = 2; /* one profile per line */
    json_out_begin_object(&w);
    json_out_key(&w, "$schema");
    json_out_string(&w, "https://www.speedscope.app/file-format-schema.json");
    json_out_key(&w, "exporter");
    json_out_string(&w, "cumemtrace " CUMEMTRACE_CLI_VERSION);
    snprintf(name, sizeof name, "cumemtrace: %s (pid %" PRId64 ")",
             s->process.exe ? s->process.exe : "?", s->process.pid);
    json_out_key(&w, "name");
    json_out_string(&w, name);
    json_out_key(&w, "activeProfileIndex");
    json_out_u64(&w, 0);
    json_out_key(&w, "profiles");
    json_out_begin_array(&w);
    int rc = 0;
    for (size_t d = 0; d < s->ndevices && rc == 0; d++) {
        const struct snap_device *dv = &s->devices[d];
        snprintf(name, sizeof name, "device %" PRId64 " at peak", dv->ordinal);
        rc |= profile(&w, s, &e, name, &dv->at_peak);
        snprintf(name, sizeof name, "device %" PRId64 " live at dump", dv->ordinal);
        rc |= profile(&w, s, &e, name, &dv->live);
        if (snapshot_is_oom(s) && s->oom.device == dv->ordinal) {
            snprintf(name, sizeof name, "device %" PRId64 " at the OOM", dv->ordinal);
            rc |= profile(&w, s, &e, name, &s->oom.live);
        }
    }
    if (rc == 0 && s->host.present) {
        rc |= profile(&w, s, &e, "host pinned at peak", &s->host.at_peak);
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
        json_out_key(&w, "name");
        json_out_string(&w, fr->name);
        if (fr->module != NULL) {
            json_out_key(&w, "file");
            json_out_string(&w, fr->module);
        }
        json_out_end_object(&w);
    }
    for (size_t i = 0; i < e.n; i++) {
        json_out_begin_object(&w);
        json_out_key(&w, "name");
        json_out_string(&w, e.v[i]);
        json_out_end_object(&w);
    }
    json_out_end_array(&w);
    json_out_end_object(&w);
    json_out_end_object(&w);
    json_out_finish(&w);
    free(e.v);
    return rc ? -1 : 0;
}
