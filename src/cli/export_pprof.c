/* export_pprof.c - a snapshot as a gzipped pprof profile (export.h).
 *
 * Encoded by protobuf-c from src/cli/pprof/profile.proto and compressed by
 * zlib: the format's own libraries rather than a hand-made encoder, in the
 * CLI only.  One sample per stack of the file, values in this order:
 *   inuse_space       bytes the stack held at its device's peak (at_peak)
 *   inuse_space_exit  bytes it held live at the dump
 *   alloc_space       bytes it allocated over the event log
 *   alloc_objects     allocations it made over the event log
 * over every device (pinned host memory is left out, as in `flamegraph`).
 * A thinned log makes the alloc_* values lower bounds; a comment says so.
 * Locations: one per frame (one line, its function), leaf first in each
 * sample, the CUDA entry point as the leaf; no mappings (the frames are
 * already named, pprof has nothing to symbolise).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli.h"
#include "export.h"
#include "hmap.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__ValueType ValueType;

#define NVALUES 4

struct strtab {
    struct arena arena;
    struct hmap map;
    char **v;
    size_t n, cap;
};

static int64_t str(struct strtab *t, const char *s)
{
    uint32_t idx;
    const char *stored;
    if (hmap_get_or_add(&t->map, s, strlen(s), (uint32_t)t->n, &idx, &stored))
        return -1;
    if (idx == t->n) {
        if (snapshot_vec_reserve((void **)&t->v, &t->cap, sizeof *t->v, t->n + 1))
            return -1;
        t->v[t->n++] = (char *)stored;
    }
    return idx;
}

/* Python frames are file:line:function; the line is what pprof shows. */
static int64_t python_line(const struct frame *fr)
{
    const char *c2 = strrchr(fr->name, ':');
    const char *c1 = NULL;
    for (const char *q = fr->name; c2 && q < c2; q++)
        if (*q == ':')
            c1 = q;
    return c1 ? strtoll(c1 + 1, NULL, 10) : 0;
}

/* gzip of buf[n] to f; 0 or -1. */
static int gzip_write(FILE *f, const uint8_t *buf, size_t n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    unsigned char out[1 << 16];
    z.next_in = (Bytef *)buf;
    z.avail_in = (uInt)n; /* callers keep n < 4 GiB */
    int rc;
    do {
        z.next_out = out;
        z.avail_out = sizeof out;
        rc = deflate(&z, Z_FINISH);
        if (rc == Z_STREAM_ERROR)
            break;
        fwrite(out, 1, sizeof out - z.avail_out, f);
    } while (rc != Z_STREAM_END);
    deflateEnd(&z);
    return rc == Z_STREAM_END ? 0 : -1;
}

static void add_groups(int64_t *vals, const struct snap_groups *g, int col)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].stack != SNAP_NO_STACK)
            vals[(size_t)g->v[i].stack * NVALUES + (size_t)col] += (int64_t)g->v[i].bytes;
}

int export_pprof(FILE *f, struct snapshot *s, struct cli_error *err)
{
    const struct snapctx *ctx = s->ctx;
    size_t nf = ctx->nframes, nst = s->nstacks;
    struct strtab t = {.v = NULL};
    arena_init(&t.arena);
    hmap_init(&t.map, &t.arena);
    int64_t *vals = calloc((nst ? nst : 1) * NVALUES, sizeof *vals);
    /* Locations and functions: frames 1..nf, then entry points. */
    Location *loc = calloc(nf + nst + 1, sizeof *loc);
    Location **locp = calloc(nf + nst + 1, sizeof *locp);
    Function *fn = calloc(nf + nst + 1, sizeof *fn);
    Function **fnp = calloc(nf + nst + 1, sizeof *fnp);
    Line *ln = calloc(nf + nst + 1, sizeof *ln);
    Line **lnp = calloc(nf + nst + 1, sizeof *lnp);
    Sample *smp = calloc(nst ? nst : 1, sizeof *smp);
    Sample **smpp = calloc(nst ? nst : 1, sizeof *smpp);
    uint64_t *ids = NULL;
    uint32_t *entry_loc = calloc(nst ? nst : 1, sizeof *entry_loc);
    uint8_t *buf = NULL;
    int rc = CLI_ENOMEM;
    if (!vals || !loc || !locp || !fn || !fnp || !ln || !lnp || !smp || !smpp || !entry_loc ||
        str(&t, "") != 0)
        goto out;
    for (size_t d = 0; d < s->ndevices; d++) {
        add_groups(vals, &s->devices[d].at_peak, 0);
        add_groups(vals, &s->devices[d].live, 1);
    }
    size_t total_frames = 0;
    for (size_t i = 0; i < s->events.n; i++) {
        const struct snap_event *e = &s->events.v[i];
        if (e->device < 0 || e->delta <= 0 || e->stack_id <= 0 || e->unfocused)
            continue;
        uint32_t st = snapshot_stack_index(s, e->stack_id);
        if (st == SNAP_NO_STACK)
            continue;
        vals[(size_t)st * NVALUES + 2] += e->delta;
        vals[(size_t)st * NVALUES + 3] += 1;
    }
    size_t nloc = 0;
    for (size_t i = 0; i < nf; i++) {
        const struct frame *fr = &ctx->frames[i];
        perftools__profiles__function__init(&fn[nloc]);
        perftools__profiles__location__init(&loc[nloc]);
        perftools__profiles__line__init(&ln[nloc]);
        int64_t name = str(&t, fr->name), file = str(&t, fr->module ? fr->module : "");
        if (name < 0 || file < 0)
            goto out;
        fn[nloc].id = nloc + 1;
        fn[nloc].name = fn[nloc].system_name = name;
        fn[nloc].filename = file;
        ln[nloc].function_id = nloc + 1;
        ln[nloc].line = fr->type == FRAME_PYTHON ? python_line(fr) : 0;
        lnp[nloc] = &ln[nloc];
        loc[nloc].id = nloc + 1;
        loc[nloc].n_line = 1;
        loc[nloc].line = &lnp[nloc];
        fnp[nloc] = &fn[nloc];
        locp[nloc] = &loc[nloc];
        nloc++;
    }
    /* Entry points: one location each, found by name among those made. */
    for (size_t i = 0; i < nst; i++) {
        const char *entry = s->stacks[i].entry ? s->stacks[i].entry : "unknown";
        size_t k;
        for (k = nf; k < nloc; k++)
            if (strcmp(t.v[fn[k].name], entry) == 0)
                break;
        if (k == nloc) {
            int64_t name = str(&t, entry);
            if (name < 0)
                goto out;
            perftools__profiles__function__init(&fn[nloc]);
            perftools__profiles__location__init(&loc[nloc]);
            perftools__profiles__line__init(&ln[nloc]);
            fn[nloc].id = nloc + 1;
            fn[nloc].name = fn[nloc].system_name = name;
            ln[nloc].function_id = nloc + 1;
            lnp[nloc] = &ln[nloc];
            loc[nloc].id = nloc + 1;
            loc[nloc].n_line = 1;
            loc[nloc].line = &lnp[nloc];
            fnp[nloc] = &fn[nloc];
            locp[nloc] = &loc[nloc];
            nloc++;
        }
        entry_loc[i] = (uint32_t)k;
        total_frames += s->stacks[i].nframes + 1;
    }
    ids = calloc(total_frames ? total_frames : 1, sizeof *ids);
    if (ids == NULL)
        goto out;
    size_t nsmp = 0, used = 0;
    for (size_t i = 0; i < nst; i++) {
        int64_t *v = &vals[i * NVALUES];
        if (v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0)
            continue;
        const struct snap_stack *st = &s->stacks[i];
        uint64_t *id = ids + used;
        id[0] = entry_loc[i] + 1;
        for (uint32_t k = 0; k < st->nframes; k++)
            id[k + 1] = (uint64_t)st->frames[k] + 1;
        perftools__profiles__sample__init(&smp[nsmp]);
        smp[nsmp].n_location_id = st->nframes + 1;
        smp[nsmp].location_id = id;
        smp[nsmp].n_value = NVALUES;
        smp[nsmp].value = v;
        smpp[nsmp] = &smp[nsmp];
        nsmp++;
        used += st->nframes + 1;
    }
    static const char *const types[NVALUES][2] = {{"inuse_space", "bytes"},
                                                  {"inuse_space_exit", "bytes"},
                                                  {"alloc_space", "bytes"},
                                                  {"alloc_objects", "count"}};
    ValueType vt[NVALUES], *vtp[NVALUES];
    for (int i = 0; i < NVALUES; i++) {
        perftools__profiles__value_type__init(&vt[i]);
        vt[i].type = str(&t, types[i][0]);
        vt[i].unit = str(&t, types[i][1]);
        if (vt[i].type < 0 || vt[i].unit < 0)
            goto out;
        vtp[i] = &vt[i];
    }
    char note[256];
    snprintf(note, sizeof note, "cumemtrace %s: %s pid %" PRId64 ", %s dump; inuse_space is "
             "what each stack held at its device's peak", CUMEMTRACE_CLI_VERSION,
             s->process.exe ? s->process.exe : "?", s->process.pid, s->reason ? s->reason : "?");
    int64_t comments[2];
    size_t ncomments = 0;
    if ((comments[ncomments++] = str(&t, note)) < 0)
        goto out;
    if (s->events.thinned != 0 || s->events.stride > 1) {
        snprintf(note, sizeof note, "the event log was thinned (%zu of %" PRIu64 " events "
                 "kept): alloc_space and alloc_objects are lower bounds", s->events.n,
                 s->events.recorded);
        if ((comments[ncomments++] = str(&t, note)) < 0)
            goto out;
    }
    Profile p;
    perftools__profiles__profile__init(&p);
    p.n_sample_type = NVALUES;
    p.sample_type = vtp;
    p.n_sample = nsmp;
    p.sample = smpp;
    p.n_location = nloc;
    p.location = locp;
    p.n_function = nloc;
    p.function = fnp;
    p.n_comment = ncomments;
    p.comment = comments;
    p.default_sample_type = vt[0].type;
    if (s->process.start_wall_ns != SNAP_UNKNOWN_I64)
        p.time_nanos = s->process.start_wall_ns;
    if (s->process.dump_time_ns != SNAP_UNKNOWN_I64)
        p.duration_nanos = s->process.dump_time_ns;
    p.n_string_table = t.n; /* last: the strings above are all in */
    p.string_table = t.v;
    size_t n = perftools__profiles__profile__get_packed_size(&p);
    if (n >= UINT32_MAX) {
        rc = errors_set(err, CLI_EVALUE, "cannot export '%s' for pprof: the profile would "
                        "be %zu bytes, more than gzip in one piece takes", s->file, n);
        goto done;
    }
    buf = malloc(n ? n : 1);
    if (buf == NULL)
        goto out;
    perftools__profiles__profile__pack(&p, buf);
    rc = gzip_write(f, buf, n) == 0 ? 0 : CLI_ENOMEM;
out:
    if (rc == CLI_ENOMEM)
        errors_set(err, CLI_ENOMEM, "cannot export '%s': out of memory", s->file);
done:
    free(buf);
    free(ids);
    free(entry_loc);
    free(smpp);
    free(smp);
    free(lnp);
    free(ln);
    free(fnp);
    free(fn);
    free(locp);
    free(loc);
    free(vals);
    free(t.v);
    hmap_free(&t.map);
    arena_free(&t.arena);
    return rc;
}
