/* export_pprof.c - a snapshot as a gzipped pprof profile (export.h); what
 * it holds (the four sample types, a sample per stack or per (stack,
 * range), PyTorch's tensors in the inuse types, the locations and their
 * functions) is docs/cli.md's `export` section.
 *
 * Encoded by protobuf-c from src/cli/views/pprof/profile.proto and compressed
 * by zlib: the format's own libraries rather than a hand-made encoder, in the
 * CLI only.  Each function's system_name differs from its name (the frame's
 * full name, or empty): pprof takes a name equal to its system_name for a
 * demangled C++ name to shorten, cutting (...) and <...> out of it, which
 * would merge overloads and print Python's "<module>" as nothing.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli.h"
#include "export.h"
#include "hmap.h"
#include "holders.h"
#include "profile.pb-c.h"
#include "snapshot_phases.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Label Label;

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

/* Python frames are file:line:function (file being fr->module); *func
 * gets the function, the result is the line (0 when the name is not of
 * that shape: the whole name is then the function). */
static int64_t python_line(const struct frame *fr, const char **func)
{
    size_t m = fr->module ? strlen(fr->module) : 0;
    *func = fr->name;
    if (m == 0 || strncmp(fr->name, fr->module, m) != 0 || fr->name[m] != ':')
        return 0;
    char *end;
    long long line = strtoll(fr->name + m + 1, &end, 10);
    if (*end != ':' || end[1] == '\0')
        return 0;
    *func = end + 1;
    return line;
}

/* Functions are one per (name, file): pprof's identity of a function. */
struct fntab {
    struct hmap map;
    Function *v;
    Function **p;
    size_t n;
    char *key;
    size_t keycap;
};

/* A location as built: one line of one function, with the pointer to
 * that line protobuf-c's Location wants. */
struct location {
    Location loc;
    Line ln, *lnp;
};

/* Location n (id n + 1): function fi (0-based), at `line` (0: none). */
static void location_init(struct location *lt, Location **locp, size_t n, int64_t fi,
                          int64_t line)
{
    struct location *l = &lt[n];
    perftools__profiles__location__init(&l->loc);
    perftools__profiles__line__init(&l->ln);
    l->ln.function_id = (uint64_t)fi + 1;
    l->ln.line = line;
    l->lnp = &l->ln;
    l->loc.id = n + 1;
    l->loc.mapping_id = 1;
    l->loc.n_line = 1;
    l->loc.line = &l->lnp;
    locp[n] = &l->loc;
}

/* A sample as built, with its range's label and the pointer to it. */
struct sample {
    Sample smp;
    Label lab, *labp;
};

static int64_t function_of(struct fntab *ft, struct strtab *t, const char *name,
                           const char *file, const char *system_name)
{
    size_t a = strlen(name), b = strlen(file);
    if (snapshot_vec_reserve((void **)&ft->key, &ft->keycap, 1, a + b + 1))
        return -1;
    memcpy(ft->key, name, a);
    ft->key[a] = '\0';
    memcpy(ft->key + a + 1, file, b);
    uint32_t idx;
    const char *stored;
    if (hmap_get_or_add(&ft->map, ft->key, a + b + 1, (uint32_t)ft->n, &idx, &stored))
        return -1;
    if (idx == ft->n) {
        Function *fn = &ft->v[ft->n];
        perftools__profiles__function__init(fn);
        int64_t ni = str(t, name), fi = str(t, file);
        int64_t si = strcmp(system_name, name) != 0 ? str(t, system_name) : 0;
        if (ni < 0 || fi < 0 || si < 0)
            return -1;
        fn->id = ft->n + 1;
        fn->name = ni;
        fn->system_name = si;
        fn->filename = fi;
        ft->p[ft->n++] = fn;
    }
    return idx;
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

/* Whether some device has ranges (by_phase lists each call site's share of
 * each): samples are then one per (stack, range), labelled with the range. */
static bool by_range(const struct snapshot *s)
{
    for (size_t d = 0; d < s->ndevices; d++)
        if (s->devices[d].by_phase.present && s->devices[d].by_phase.n > 0)
            return true;
    return false;
}

/* The samples: one per stack (range -1), or per (stack, range). */
struct row {
    uint32_t stack;
    int64_t range;
    int64_t vals[NVALUES];
};

struct rows {
    struct arena arena;
    struct hmap map;
    struct row *v;
    size_t n, cap;
};

/* The row of (stack, range), added when new; SIZE_MAX on OOM. */
static size_t row_of(struct rows *r, uint32_t stack, int64_t range)
{
    unsigned char k[12];
    memcpy(k, &stack, 4);
    memcpy(k + 4, &range, 8);
    uint32_t idx;
    if (hmap_get_or_add(&r->map, k, sizeof k, (uint32_t)r->n, &idx, NULL))
        return SIZE_MAX;
    if (idx == r->n) {
        if (snapshot_vec_reserve((void **)&r->v, &r->cap, sizeof *r->v, r->n + 1))
            return SIZE_MAX;
        r->v[r->n++] = (struct row){.stack = stack, .range = range};
    }
    return idx;
}

/* Per (stack, range) from every device's by_phase sites: the bytes held at
 * the peak and now, and the site's own allocation counters over the run
 * (exact even where the event log was thinned).  Stacks out of --focus
 * are left out, as their groups are. -1 on OOM. */
static int rows_by_range(struct rows *r, const struct snapshot *s)
{
    for (size_t d = 0; d < s->ndevices; d++) {
        const struct snap_phase_rows *pr = &s->devices[d].by_phase;
        for (size_t i = 0; i < pr->n; i++)
            for (size_t k = 0; k < pr->v[i].nsites; k++) {
                const struct snap_phase_site *st = &pr->sites[pr->v[i].first_site + k];
                if (st->stack == SNAP_NO_STACK || s->stacks[st->stack].unfocused)
                    continue;
                size_t at = row_of(r, st->stack, pr->v[i].phase);
                if (at == SIZE_MAX)
                    return -1;
                int64_t *v = r->v[at].vals;
                v[0] += (int64_t)st->at_peak_bytes;
                v[1] += (int64_t)st->bytes;
                v[2] += (int64_t)st->bytes_allocated;
                v[3] += (int64_t)st->allocs;
            }
    }
    return 0;
}

static void add_groups(struct row *rows, const struct snap_groups *g, int col)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].stack != SNAP_NO_STACK)
            rows[g->v[i].stack].vals[col] += (int64_t)g->v[i].bytes;
}

/* A row per stack, row i stack i: the bytes it held at the peak and at the
 * dump (not the columns PyTorch's tensors fill, tcol), what it allocated
 * over the event log. -1 on OOM. */
static int rows_by_stack(struct rows *r, const struct snapshot *s, const bool tcol[2])
{
    for (size_t i = 0; i < s->nstacks; i++)
        if (row_of(r, (uint32_t)i, -1) == SIZE_MAX)
            return -1;
    for (size_t d = 0; d < s->ndevices; d++) {
        if (!tcol[0])
            add_groups(r->v, &s->devices[d].at_peak, 0);
        if (!tcol[1])
            add_groups(r->v, &s->devices[d].live, 1);
    }
    for (size_t i = 0; i < s->events.n; i++) {
        const struct snap_event *e = &s->events.v[i];
        if (e->device < 0 || e->delta <= 0 || e->stack_id <= 0 || e->unfocused)
            continue;
        uint32_t st = snapshot_stack_index(s, e->stack_id);
        if (st == SNAP_NO_STACK)
            continue;
        r->v[st].vals[2] += e->delta;
        r->v[st].vals[3] += 1;
    }
    return 0;
}

/* PyTorch's tensors as samples: one per distinct stack (or name, for a
 * group without one), with its bytes at the peak and at the dump. */
struct tsample {
    const uint32_t *frames; /* innermost first; NULL: named */
    uint32_t nframes;
    const char *name;       /* interned: the sample's one location */
    int64_t vals[NVALUES]; /* at the peak, at the dump; no allocations */
};

struct tsamples {
    struct arena arena;
    struct hmap map;
    struct tsample *v;
    size_t n, cap;
    size_t nnamed;          /* samples that need a location of their own */
    char *key;
    size_t key_cap;
};

static int tsample_add(struct tsamples *ts, const uint32_t *frames, uint32_t n,
                       const char *name, int col, uint64_t bytes)
{
    if (bytes == 0)
        return 0;
    size_t klen = name ? 1 + sizeof name : 1 + n * sizeof *frames;
    if (snapshot_vec_reserve((void **)&ts->key, &ts->key_cap, 1, klen))
        return -1;
    ts->key[0] = name ? 'N' : 'F';
    if (name)
        memcpy(ts->key + 1, &name, sizeof name);
    else if (n > 0)
        memcpy(ts->key + 1, frames, n * sizeof *frames);
    uint32_t idx;
    if (hmap_get_or_add(&ts->map, ts->key, klen, (uint32_t)ts->n, &idx, NULL))
        return -1;
    if (idx == ts->n) {
        if (snapshot_vec_reserve((void **)&ts->v, &ts->cap, sizeof *ts->v, ts->n + 1))
            return -1;
        ts->v[ts->n++] = (struct tsample){name ? NULL : frames, name ? 0 : n, name, {0}};
        ts->nnamed += name != NULL;
    }
    ts->v[idx].vals[col] += (int64_t)bytes;
    return 0;
}

static int tsamples_of(struct tsamples *ts, struct snapshot *s, const struct snap_tensors *t,
                       int col)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct snap_tgroup *g = &t->v[i];
        const char *name = g->nframes ? NULL : holders_group_name(s, g, false);
        if ((g->nframes == 0 && name == NULL) ||
            tsample_add(ts, g->frames, g->nframes, name, col, g->bytes) != 0)
            return -1;
    }
    if (t->has_more) {
        char text[64];
        snprintf(text, sizeof text, "[%" PRIu64 " more lines]", t->more_groups);
        if (tsample_add(ts, NULL, 0, snapshot_intern(s->ctx, text, strlen(text)), col,
                        t->more_bytes) != 0)
            return -1;
    }
    if (t->has_cache && t->cache_bytes != SNAP_UNKNOWN &&
        tsample_add(ts, NULL, 0, "[PyTorch's cache]", col, t->cache_bytes) != 0)
        return -1;
    return 0;
}

/* Every device's tensors at the peak and at the dump; any[0] / any[1]
 * whether the file has them at the peak / at the dump. -1 on OOM. */
static int tsamples_build(struct tsamples *ts, struct snapshot *s, bool any[2])
{
    any[0] = any[1] = false;
    for (size_t d = 0; d < s->ndevices; d++) {
        const struct snap_device *dv = &s->devices[d];
        const struct snap_tensors *pk = holders_tensors(s, dv, HOLDERS_PEAK);
        const struct snap_tensors *now = holders_tensors(s, dv, HOLDERS_NOW);
        if (pk != NULL && pk->present) {
            any[0] = true;
            if (tsamples_of(ts, s, pk, 0) != 0)
                return -1;
        }
        if (now != NULL && now->present) {
            any[1] = true;
            if (tsamples_of(ts, s, now, 1) != 0)
                return -1;
        }
    }
    return 0;
}

int export_pprof(FILE *f, struct snapshot *s, struct cli_error *err)
{
    const struct snapctx *ctx = s->ctx;
    size_t nf = ctx->nframes, nst = s->nstacks;
    struct strtab t = {.v = NULL};
    arena_init(&t.arena);
    hmap_init(&t.map, &t.arena);
    struct tsamples ts = {.v = NULL};
    arena_init(&ts.arena);
    hmap_init(&ts.map, &ts.arena);
    bool tcol[2]; /* the inuse columns PyTorch's tensors fill */
    int tb = tsamples_build(&ts, s, tcol); /* none under --segments */
    bool tensors = tcol[0] || tcol[1];
    size_t extra = ts.nnamed; /* the named samples' locations and functions */
    /* Locations and functions: frames 1..nf, then entry points. */
    struct location *lt = calloc(nf + nst + extra + 1, sizeof *lt);
    Location **locp = calloc(nf + nst + extra + 1, sizeof *locp);
    struct fntab ft = {.v = calloc(nf + nst + extra + 1, sizeof *ft.v),
                       .p = calloc(nf + nst + extra + 1, sizeof *ft.p)};
    hmap_init(&ft.map, &t.arena);
    /* the location of each entry point's function, 0 for none yet */
    uint32_t *fn_entry_loc = calloc(nf + nst + extra + 1, sizeof *fn_entry_loc);
    /* each stack's entry point's location, then each tensor sample's name's */
    uint32_t *name_loc = calloc(nst + ts.n + 1, sizeof *name_loc);
    struct sample *smp = NULL;
    Sample **smpp = NULL;
    bool ranged = by_range(s);
    struct rows rw = {.v = NULL};
    arena_init(&rw.arena);
    hmap_init(&rw.map, &rw.arena);
    uint64_t *ids = NULL;
    uint8_t *buf = NULL;
    int rc = CLI_ENOMEM;
    if (tb != 0 || !lt || !locp || !ft.v || !ft.p || !fn_entry_loc || !name_loc ||
        str(&t, "") != 0)
        goto out;
    size_t nloc = 0;
    for (size_t i = 0; i < nf; i++) {
        const struct frame *fr = &ctx->frames[i];
        const char *func = fr->name;
        int64_t line = fr->type == FRAME_PYTHON ? python_line(fr, &func) : 0;
        int64_t fi = function_of(&ft, &t, func,
                                 fr->type == FRAME_PYTHON && fr->module ? fr->module : "",
                                 fr->name);
        if (fi < 0)
            goto out;
        location_init(lt, locp, nloc++, fi, line);
    }
    /* Entry points, then the named tensor samples: one location per
     * function of that name. */
    for (size_t i = 0; i < nst + ts.n; i++) {
        const char *name = i >= nst ? ts.v[i - nst].name
                           : s->stacks[i].entry ? s->stacks[i].entry : "unknown";
        if (name == NULL)
            continue;
        int64_t fi = function_of(&ft, &t, name, "", "");
        if (fi < 0)
            goto out;
        if (fn_entry_loc[fi] == 0) {
            location_init(lt, locp, nloc, fi, 0);
            fn_entry_loc[fi] = (uint32_t)++nloc;
        }
        name_loc[i] = fn_entry_loc[fi] - 1;
    }
    /* The samples' rows: per stack, or per (stack, range). */
    if (ranged) {
        if (rows_by_range(&rw, s) != 0)
            goto out;
        for (size_t i = 0; i < rw.n; i++)
            for (int c = 0; c < 2; c++)
                if (tcol[c])
                    rw.v[i].vals[c] = 0; /* the tensors' column */
    } else if (rows_by_stack(&rw, s, tcol) != 0) {
        goto out;
    }
    size_t id_room = 0, nrows = rw.n + ts.n;
    for (size_t i = 0; i < rw.n; i++)
        id_room += s->stacks[rw.v[i].stack].nframes + 1;
    for (size_t i = 0; i < ts.n; i++)
        id_room += ts.v[i].name ? 1 : ts.v[i].nframes;
    ids = calloc(id_room ? id_room : 1, sizeof *ids);
    smp = calloc(nrows ? nrows : 1, sizeof *smp);
    smpp = calloc(nrows ? nrows : 1, sizeof *smpp);
    int64_t range_key = str(&t, "range");
    if (ids == NULL || smp == NULL || smpp == NULL || range_key < 0)
        goto out;
    size_t nsmp = 0, used = 0;
    /* The stacks' rows, then the tensor samples: locations innermost first. */
    for (size_t r = 0; r < rw.n + ts.n; r++) {
        uint64_t *id = ids + used;
        size_t n = 0;
        int64_t *v;
        if (r < rw.n) {
            v = rw.v[r].vals;
            if (v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0)
                continue;
            const struct snap_stack *st = &s->stacks[rw.v[r].stack];
            id[n++] = name_loc[rw.v[r].stack] + 1;
            for (uint32_t k = 0; k < st->nframes; k++)
                id[n++] = (uint64_t)st->frames[k] + 1;
        } else {
            struct tsample *x = &ts.v[r - rw.n];
            v = x->vals;
            if (x->name != NULL)
                id[n++] = name_loc[nst + r - rw.n] + 1;
            for (uint32_t k = 0; k < x->nframes; k++)
                id[n++] = (uint64_t)x->frames[k] + 1;
        }
        struct sample *sm = &smp[nsmp];
        perftools__profiles__sample__init(&sm->smp);
        sm->smp.n_location_id = n;
        sm->smp.location_id = id;
        sm->smp.n_value = NVALUES;
        sm->smp.value = v;
        if (r < rw.n && rw.v[r].range >= 0) {
            perftools__profiles__label__init(&sm->lab);
            sm->lab.key = range_key;
            sm->lab.str = str(&t, snapshot_phase_path(s, rw.v[r].range));
            if (sm->lab.str < 0)
                goto out;
            sm->labp = &sm->lab;
            sm->smp.n_label = 1;
            sm->smp.label = &sm->labp;
        }
        smpp[nsmp++] = &sm->smp;
        used += n;
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
             "what each stack held at its device's peak%s", CUMEMTRACE_CLI_VERSION,
             s->process.exe ? s->process.exe : "?", s->process.pid, s->reason ? s->reason : "?",
             tensors ? " (PyTorch's tensors at max_memory_allocated, and its cache; "
                       "inuse_space_exit: at the dump)" : "");
    int64_t comments[2];
    size_t ncomments = 0;
    if ((comments[ncomments++] = str(&t, note)) < 0)
        goto out;
    if (!ranged && (s->events.thinned != 0 || s->events.stride > 1)) {
        snprintf(note, sizeof note, "the event log was thinned (%zu of %" PRIu64 " events "
                 "kept): alloc_space and alloc_objects are lower bounds", s->events.n,
                 s->events.recorded);
        if ((comments[ncomments++] = str(&t, note)) < 0)
            goto out;
    }
    Mapping map, *mapp = &map;
    perftools__profiles__mapping__init(&map);
    map.id = 1;
    map.filename = str(&t, s->process.exe ? s->process.exe : "unknown");
    if (map.filename < 0)
        goto out;
    map.has_functions = map.has_filenames = map.has_line_numbers = map.has_inline_frames = 1;
    Profile p;
    perftools__profiles__profile__init(&p);
    p.n_mapping = 1;
    p.mapping = &mapp;
    p.n_sample_type = NVALUES;
    p.sample_type = vtp;
    p.n_sample = nsmp;
    p.sample = smpp;
    p.n_location = nloc;
    p.location = locp;
    p.n_function = ft.n;
    p.function = ft.p;
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
    free(name_loc);
    free(ts.v);
    free(ts.key);
    hmap_free(&ts.map);
    arena_free(&ts.arena);
    free(buf);
    free(ids);
    free(smpp);
    free(smp);
    free(rw.v);
    hmap_free(&rw.map);
    arena_free(&rw.arena);
    hmap_free(&ft.map);
    free(ft.key);
    free(ft.p);
    free(ft.v);
    free(fn_entry_loc);
    free(locp);
    free(lt);
    free(t.v);
    hmap_free(&t.map);
    arena_free(&t.arena);
    return rc;
}
