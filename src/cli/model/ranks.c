/* ranks.c - the streaming merge of many ranks' snapshots (ranks.h). */
#include "ranks.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errors.h"
#include "frames.h"
#include "holders.h"
#include "sites.h"
#include "snapshot.h"
#include "snapshot_phases.h"
#include "snapshot_read.h"

/* ---- paths ---- */

/* True when directory `dir` holds a snapshot "<stem>.json" or
 * "<stem>.<reason>...json" beside the stream "<stem>.stream". */
static bool stream_superseded(const char *dir, const char *stream, size_t stem)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        found = l > stem + 5 && strncmp(e->d_name, stream, stem) == 0 &&
                e->d_name[stem] == '.' && strcmp(e->d_name + l - 5, ".json") == 0;
    }
    closedir(d);
    return found;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

bool ranks_any_dir(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is_dir(paths[i]))
            return true;
    return false;
}

static int push_path(char ***v, size_t *n, size_t *cap, const char *dir, const char *name)
{
    if (*n == *cap &&
        snapshot_vec_reserve((void **)v, cap, sizeof **v, *n + 1) != 0)
        return -1;
    size_t l = strlen(name) + (dir ? strlen(dir) + 1 : 0) + 1;
    char *p = malloc(l);
    if (p == NULL)
        return -1;
    if (dir)
        snprintf(p, l, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    else
        memcpy(p, name, l);
    (*v)[(*n)++] = p;
    return 0;
}

int ranks_expand(char **paths, size_t n, char ***out, size_t *nout)
{
    char **v = NULL;
    size_t nv = 0, cap = 0;
    struct cli_error err = {0, ""};
    for (size_t i = 0; i < n; i++) {
        if (!is_dir(paths[i])) {
            if (push_path(&v, &nv, &cap, NULL, paths[i]) != 0)
                goto nomem;
            continue;
        }
        DIR *d = opendir(paths[i]);
        if (d == NULL) {
            errors_set(&err, CLI_EIO, "cannot read directory '%s': %s", paths[i],
                       strerror(errno));
            goto fail;
        }
        size_t first = nv;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t l = strlen(e->d_name);
            if (e->d_name[0] == '.' || l < 6)
                continue;
            /* A stream stands for a process only when it wrote no snapshot
             * (killed): the same name's "<stem>...json" is the better record. */
            if (l > 7 && strcmp(e->d_name + l - 7, ".stream") == 0) {
                if (stream_superseded(paths[i], e->d_name, l - 7))
                    continue;
            } else if (strcmp(e->d_name + l - 5, ".json") != 0) {
                continue;
            }
            if (push_path(&v, &nv, &cap, paths[i], e->d_name) != 0) {
                closedir(d);
                goto nomem;
            }
        }
        closedir(d);
        if (nv == first) {
            errors_set(&err, CLI_ENOENT, "no snapshot (*.json, *.stream) in directory '%s'",
                       paths[i]);
            goto fail;
        }
        qsort(v + first, nv - first, sizeof *v, by_name);
    }
    *out = v;
    *nout = nv;
    return 0;
nomem:
    errors_set(&err, CLI_ENOMEM, "cannot list snapshots: out of memory");
fail:
    errors_print(&err);
    ranks_paths_free(v, nv);
    return err.code;
}

void ranks_paths_free(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

/* ---- the merge ---- */

static const char *keep(struct ranks *r, const char *s)
{
    return s ? arena_strndup(&r->arena, s, strlen(s)) : NULL;
}

/* A recorded string as text views may print it (esc.h). */
static const char *keep_shown(struct ranks *r, struct snapctx *ctx, const char *s)
{
    return s ? keep(r, snapshot_display(ctx, s)) : NULL;
}

/* The row of the process that wrote s, created when new; RANKS_NONE on
 * OOM. */
static size_t row_of(struct ranks *r, const struct snapshot *s, size_t file)
{
    const struct snap_process *p = &s->process;
    char key[512];
    int n = p->rank != SNAP_UNKNOWN_I64
                ? snprintf(key, sizeof key, "rank\n%" PRId64, p->rank)
                : snprintf(key, sizeof key, "pid\n%s\n%" PRId64, p->host ? p->host : "",
                           p->pid);
    if (n < 0 || (size_t)n >= sizeof key)
        n = (int)sizeof key - 1;
    uint32_t idx;
    if (hmap_get_or_add(&r->row_keys, key, (size_t)n, (uint32_t)r->nrows, &idx, NULL) != 0)
        return RANKS_NONE;
    if (idx < r->nrows)
        return idx;
    if (snapshot_vec_reserve((void **)&r->rows, &r->rows_cap, sizeof *r->rows,
                             r->nrows + 1) != 0)
        return RANKS_NONE;
    struct rank_row *row = &r->rows[r->nrows++];
    memset(row, 0, sizeof *row);
    row->rank = p->rank;
    row->local_rank = p->local_rank;
    row->world_size = p->world_size;
    row->pid = p->pid;
    row->host = keep_shown(r, s->ctx, p->host);
    row->exe = keep_shown(r, s->ctx, p->exe);
    row->chosen = row->folded = file;
    row->start_wall_ns = p->start_wall_ns;
    row->first_oom_ns = row->first_oom_start_ns = SNAP_UNKNOWN_I64;
    row->postmortem = RANKS_NONE;
    return idx;
}

static void fold_site(struct rank_site *site, uint64_t v, size_t row)
{
    site->total += v;
    if (site->nranks == 0 || v < site->min)
        site->min = v;
    if (site->nranks == 0 || v > site->max) {
        site->max = v;
        site->max_row = row;
    }
    site->nranks++;
}

/* The row of key among the sites, in *idx; *fresh is the row when it was
 * added now (its display and callers still to fill), NULL when the key
 * had one already.  -1 when out of memory. */
static int site_row(struct ranks *r, const char *key, size_t len, uint32_t *idx,
                    struct rank_site **fresh)
{
    const char *kept;
    *fresh = NULL;
    if (hmap_get_or_add(&r->site_keys, key, len, (uint32_t)r->nsites, idx, &kept) != 0)
        return -1;
    if (*idx != r->nsites)
        return 0;
    if (snapshot_vec_reserve((void **)&r->sites, &r->sites_cap, sizeof *r->sites,
                             r->nsites + 1) != 0)
        return -1;
    *fresh = &r->sites[r->nsites++];
    memset(*fresh, 0, sizeof **fresh);
    (*fresh)->key = kept;
    (*fresh)->key_len = len;
    return 0;
}

/* Adds what s held at each device's peak, by call site, to the sites. */
static int fold_segments(struct ranks *r, struct snapshot *s, size_t row)
{
    struct sites_sum sum;
    sites_init(&sum, BY_STACK);
    int rc = -1;
    for (size_t d = 0; d < s->ndevices; d++)
        if (sites_add(&sum, s, &s->devices[d].at_peak) != 0)
            goto out;
    for (size_t i = 0; i < sum.ntouched; i++) {
        uint32_t id = sum.touched[i];
        const struct site *site = frames_site_get(s->ctx, BY_STACK, id);
        size_t len;
        char *text = frames_site_text((struct snapshot *)site->snap, site->stack, BY_STACK,
                                      &len);
        if (text == NULL)
            goto out;
        uint32_t idx;
        struct rank_site *rs;
        int added = site_row(r, text, len, &idx, &rs);
        free(text);
        if (added != 0)
            goto out;
        if (rs != NULL) {
            char via[512];
            rs->display = keep(r, site->display);
            rs->callers = keep(r, frames_callers(site->snap, site->stack, 3, via,
                                                 sizeof via));
            if (rs->display == NULL || rs->callers == NULL)
                goto out;
        }
        fold_site(&r->sites[idx], sum.bytes[id], row);
    }
    rc = 0;
out:
    sites_free(&sum);
    return rc;
}

static int holder_by_name(const void *a, const void *b)
{
    const struct holder *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return (x->bytes < y->bytes) - (x->bytes > y->bytes); /* the largest first */
}

/* Key of a tensors line among the sites: its holder's name behind a byte
 * that no frames_site_text starts with, one per moment. */
static size_t tensor_key(char *buf, size_t n, enum ranks_moment m, const char *name)
{
    int w = snprintf(buf, n, "%c%s", m == RANKS_TENSORS_PEAK ? '\x01' : '\x02', name);
    return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}

/* The holders of s at moment m, every device's, as its report lists
 * them: at the peak, or at the failure of a post-mortem, else at the dump;
 * *out malloc'd (*n of them).  0, or -1 when out of memory. */
static int moment_holders(struct snapshot *s, enum ranks_moment m, struct holder **out,
                          size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    bool failure = m == RANKS_TENSORS_NOW && s->oom.present;
    for (size_t d = 0; d < (failure ? 1 : s->ndevices); d++) {
        struct holders h;
        if (holders_get(s, failure ? NULL : &s->devices[d],
                        failure ? HOLDERS_OOM : m == RANKS_TENSORS_PEAK ? HOLDERS_PEAK
                                                                       : HOLDERS_NOW,
                        false, &h) != 0)
            return -1;
        if (h.source == HOLDERS_TENSORS && h.n > 0) {
            if (snapshot_vec_reserve((void **)out, &cap, sizeof **out, *n + h.n) != 0) {
                holders_free(&h);
                return -1;
            }
            memcpy(*out + *n, h.v, h.n * sizeof *h.v);
            *n += h.n;
        }
        holders_free(&h);
    }
    return 0;
}

/* Adds PyTorch's tensors of s at moment m, by line (one line's groups on
 * several devices summed, as fold_segments sums the devices), to the
 * sites. */
static int fold_tensors(struct ranks *r, struct snapshot *s, size_t row, enum ranks_moment m)
{
    struct holder *v;
    size_t n;
    if (moment_holders(s, m, &v, &n) != 0)
        return -1;
    if (n > 1)
        qsort(v, n, sizeof *v, holder_by_name);
    int rc = -1;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        uint64_t bytes = v[i].bytes;
        while (j < n && strcmp(v[j].name, v[i].name) == 0)
            bytes += v[j++].bytes;
        char key[2048];
        size_t len = tensor_key(key, sizeof key, m, v[i].name);
        uint32_t idx;
        struct rank_site *rs;
        if (site_row(r, key, len, &idx, &rs) != 0)
            goto out;
        if (rs != NULL) {
            char via[512];
            rs->moment = m;
            rs->display = keep(r, v[i].display);
            rs->callers = keep(r, holders_callers(s, &v[i], 3, false, via, sizeof via));
            if (rs->display == NULL || rs->callers == NULL)
                goto out;
        }
        fold_site(&r->sites[idx], bytes, row);
        i = j;
    }
    rc = 0;
out:
    free(v);
    return rc;
}

/* Whether every device of s has PyTorch's tensors at moment m (a
 * post-mortem's "now" is its failure's). */
static bool has_tensors(const struct snapshot *s, enum ranks_moment m)
{
    if (m == RANKS_TENSORS_NOW && s->oom.present)
        return holders_have_tensors(s, NULL, HOLDERS_OOM);
    for (size_t d = 0; d < s->ndevices; d++)
        if (!holders_have_tensors(s, &s->devices[d],
                                  m == RANKS_TENSORS_PEAK ? HOLDERS_PEAK : HOLDERS_NOW))
            return false;
    return true;
}

/* Folds s into the sites at every moment it has: the segments always,
 * PyTorch's tensors at the peak and now where the file has them. */
static int fold_sites(struct ranks *r, struct snapshot *s, size_t row)
{
    struct rank_row *rw = &r->rows[row];
    rw->peak_tensors = has_tensors(s, RANKS_TENSORS_PEAK);
    rw->now_tensors = has_tensors(s, RANKS_TENSORS_NOW);
    if (fold_segments(r, s, row) != 0)
        return -1;
    if (rw->peak_tensors && fold_tensors(r, s, row, RANKS_TENSORS_PEAK) != 0)
        return -1;
    if (rw->now_tensors && fold_tensors(r, s, row, RANKS_TENSORS_NOW) != 0)
        return -1;
    return 0;
}

struct range_sum {
    const char *path; /* the snapshot's, raw */
    uint64_t at_peak, live;
};

static int by_raw_path(const void *x, const void *y)
{
    return strcmp(((const struct range_sum *)x)->path, ((const struct range_sum *)y)->path);
}

/* Keeps s's ranges in f: the by_phase rows of its devices and pinned host
 * memory summed by path (one path may show on several devices), sorted by
 * path.  Returns 0, or -1 when out of memory. */
static int keep_ranges(struct ranks *r, const struct snapshot *s, struct rank_file *f)
{
    f->has_phases = s->phases.present;
    size_t n = s->host.by_phase.n;
    for (size_t d = 0; d < s->ndevices; d++)
        n += s->devices[d].by_phase.n;
    if (n == 0)
        return 0;
    struct range_sum *v = malloc(n * sizeof *v);
    if (v == NULL)
        return -1;
    size_t k = 0;
    for (size_t d = 0; d <= s->ndevices; d++) {
        const struct snap_phase_rows *rows =
            d < s->ndevices ? &s->devices[d].by_phase : &s->host.by_phase;
        for (size_t i = 0; i < rows->n; i++)
            v[k++] = (struct range_sum){snapshot_phase_path(s, rows->v[i].phase),
                                        rows->v[i].at_peak_bytes, rows->v[i].bytes};
    }
    qsort(v, n, sizeof *v, by_raw_path);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && strcmp(v[m - 1].path, v[i].path) == 0) {
            v[m - 1].at_peak += v[i].at_peak;
            v[m - 1].live += v[i].live;
        } else {
            v[m++] = v[i];
        }
    }
    struct rank_range *out = arena_alloc(&r->arena, m * sizeof *out);
    int rc = out != NULL ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < m; i++) {
        out[i] = (struct rank_range){keep_shown(r, s->ctx, v[i].path), v[i].at_peak,
                                     v[i].live};
        if (out[i].path == NULL)
            rc = -1;
    }
    free(v);
    if (rc == 0) {
        f->ranges = out;
        f->nranges = m;
    }
    return rc;
}

static void add_reason(struct rank_row *row, const char *reason)
{
    size_t n = strlen(row->reasons), l = strlen(reason);
    for (const char *p = row->reasons; (p = strstr(p, reason)) != NULL; p += l)
        if ((p == row->reasons || p[-1] == ' ') && (p[l] == ',' || p[l] == '\0'))
            return;
    if (n + l + 3 < sizeof row->reasons)
        snprintf(row->reasons + n, sizeof row->reasons - n, "%s%s", n ? ", " : "", reason);
}

/* The first failed attempt the file knows of: the post-mortem's request or
 * the earliest failure of the attempt log. */
static void first_failure(const struct snapshot *s, int64_t *t, int64_t *dev, uint64_t *bytes)
{
    *t = SNAP_UNKNOWN_I64;
    if (s->oom.present && s->oom.time_ns != SNAP_UNKNOWN_I64) {
        *t = s->oom.time_ns;
        *dev = s->oom.device;
        *bytes = s->oom.requested_bytes;
    }
    for (size_t i = 0; i < s->ooms.nattempts; i++) {
        const struct snap_attempt *a = &s->ooms.attempts[i];
        if (a->outcome == NULL || strcmp(a->outcome, "failed") != 0 ||
            a->t_ns == SNAP_UNKNOWN_I64 || (*t != SNAP_UNKNOWN_I64 && a->t_ns >= *t))
            continue;
        *t = a->t_ns;
        *dev = a->device;
        *bytes = a->requested_bytes;
    }
}

/* Whether f was written after g: on the wall clock when both know it (files
 * of two processes), else by time since the process started. */
static bool newer(const struct rank_file *f, const struct rank_file *g)
{
    if (f->dump_wall_ns != SNAP_UNKNOWN_I64 && g->dump_wall_ns != SNAP_UNKNOWN_I64)
        return f->dump_wall_ns > g->dump_wall_ns;
    return f->dump_time_ns != SNAP_UNKNOWN_I64 &&
           (g->dump_time_ns == SNAP_UNKNOWN_I64 || f->dump_time_ns > g->dump_time_ns);
}

/* pass 0: rows and files (and call sites of each rank's first file);
 * pass 1: call sites again, from each rank's newest file. */
static int merge_file(struct ranks *r, const char *path, size_t fi, int pass)
{
    struct snapctx ctx;
    struct snapshot s;
    struct cli_error err = {0, ""};
    snapshot_ctx_init(&ctx);
    memset(&s, 0, sizeof s);
    int rc = snapshot_read_file(&ctx, path, &s, &err);
    if (rc != 0) {
        errors_print(&err);
        snapshot_ctx_free(&ctx);
        return rc;
    }
    rc = CLI_ENOMEM;
    if (pass == 1) {
        if (fold_sites(r, &s, r->files[fi].row) == 0)
            rc = 0;
        goto out;
    }
    if (snapshot_vec_reserve((void **)&r->files, &r->files_cap, sizeof *r->files,
                             r->nfiles + 1) != 0)
        goto out;
    size_t row = row_of(r, &s, fi);
    if (row == RANKS_NONE)
        goto out;
    struct rank_file *f = &r->files[r->nfiles++];
    memset(f, 0, sizeof *f);
    f->path = path;
    f->shown = keep_shown(r, &ctx, path);
    f->reason = keep_shown(r, &ctx, s.reason);
    f->dump_time_ns = s.process.dump_time_ns;
    f->dump_wall_ns = s.process.dump_time_ns != SNAP_UNKNOWN_I64 &&
                              s.process.start_wall_ns != SNAP_UNKNOWN_I64
                          ? s.process.start_wall_ns + s.process.dump_time_ns
                          : SNAP_UNKNOWN_I64;
    f->peak_device = SNAP_UNKNOWN_I64;
    f->oom = snapshot_is_oom(&s);
    if (f->oom) {
        f->oom_device = s.oom.device;
        f->oom_time_ns = s.oom.time_ns;
        /* The user's request, as the post-mortem heads it (oom_text.c):
         * the allocator's when it stated one, else the failed call's. */
        const struct snap_allocator *al = &s.oom.allocator;
        f->oom_bytes = al->present && al->requested_bytes != SNAP_UNKNOWN &&
                               al->requested_bytes > 0
                           ? al->requested_bytes : s.oom.requested_bytes;
    }
    f->row = row;
    for (size_t d = 0; d < s.ndevices; d++) {
        const struct snap_device *dv = &s.devices[d];
        if (f->peak_device == SNAP_UNKNOWN_I64 || dv->peak_bytes > f->peak) {
            f->peak = dv->peak_bytes;
            f->peak_device = dv->ordinal;
            f->peak_time_ns = dv->peak_time_ns;
            f->peak_range = dv->peak_phase > 0
                                ? keep_shown(r, &ctx, snapshot_phase_path(&s, dv->peak_phase))
                                : NULL;
        }
        f->end_bytes += dv->current_bytes;
    }
    if (r->with_ranges && keep_ranges(r, &s, f) != 0)
        goto out;
    struct rank_row *rw = &r->rows[row];
    rw->nfiles++;
    if (rw->nfiles > 1 && s.process.pid != rw->pid)
        rw->several_pids = true;
    add_reason(rw, f->reason);
    if (s.ooms.count > rw->ooms)
        rw->ooms = s.ooms.count;
    uint64_t failed = s.ooms.count > s.ooms.recovered ? s.ooms.count - s.ooms.recovered : 0;
    if (failed > rw->failed_ooms)
        rw->failed_ooms = failed;
    int64_t start = s.process.start_wall_ns;
    if (start != SNAP_UNKNOWN_I64 &&
        (rw->start_wall_ns == SNAP_UNKNOWN_I64 || start < rw->start_wall_ns))
        rw->start_wall_ns = start;
    int64_t t, dev = -1;
    uint64_t bytes = 0;
    first_failure(&s, &t, &dev, &bytes);
    /* Earliest on the wall clock when the starts are known. */
    int64_t at = t != SNAP_UNKNOWN_I64 && start != SNAP_UNKNOWN_I64 ? start + t : t;
    int64_t best = rw->first_oom_ns == SNAP_UNKNOWN_I64 ? SNAP_UNKNOWN_I64
                   : rw->first_oom_start_ns != SNAP_UNKNOWN_I64
                       ? rw->first_oom_start_ns + rw->first_oom_ns
                       : rw->first_oom_ns;
    if (t != SNAP_UNKNOWN_I64 && (best == SNAP_UNKNOWN_I64 || at < best)) {
        rw->first_oom_ns = t;
        rw->first_oom_start_ns = start;
        rw->first_oom_device = dev;
        rw->first_oom_bytes = bytes;
        if (f->oom)
            rw->postmortem = fi; /* the post-mortem of the first failure */
    }
    if (f->oom && rw->postmortem == RANKS_NONE)
        rw->postmortem = fi;
    if (s.process.world_size != SNAP_UNKNOWN_I64 &&
        (r->world_size == SNAP_UNKNOWN_I64 || s.process.world_size > r->world_size))
        r->world_size = s.process.world_size;
    if (rw->nfiles == 1) {
        if (fold_sites(r, &s, row) != 0)
            goto out;
    } else if (newer(f, &r->files[rw->chosen])) {
        rw->chosen = fi;
        /* The row names the process of its newest file. */
        rw->pid = s.process.pid;
    }
    rc = 0;
out:
    snapshot_free(&s);
    snapshot_ctx_free(&ctx);
    if (rc == CLI_ENOMEM)
        fprintf(stderr, "cumemtrace: cannot merge snapshot '%s': out of memory\n", path);
    return rc;
}

static int by_rank(const void *a, const void *b)
{
    const struct rank_row *x = a, *y = b;
    bool kx = x->rank != SNAP_UNKNOWN_I64, ky = y->rank != SNAP_UNKNOWN_I64;
    if (kx != ky)
        return kx ? -1 : 1;
    if (kx && x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->chosen > y->chosen) - (x->chosen < y->chosen);
}

int ranks_merge(struct ranks *r, char **paths, size_t n, bool ranges)
{
    memset(r, 0, sizeof *r);
    r->with_ranges = ranges;
    arena_init(&r->arena);
    hmap_init(&r->row_keys, &r->arena);
    hmap_init(&r->site_keys, &r->arena);
    r->world_size = SNAP_UNKNOWN_I64;
    for (size_t i = 0; i < n; i++) {
        int rc = merge_file(r, paths[i], i, 0);
        if (rc != 0) {
            ranks_free(r);
            return rc;
        }
    }
    /* A rank whose newest file came after its first: its call sites again,
     * from the newest one (a rank's files are listed newest first in the
     * usual naming - exit before oom - so this is rare). */
    bool redo = false;
    for (size_t i = 0; i < r->nrows; i++)
        redo |= r->rows[i].chosen != r->rows[i].folded;
    if (redo) {
        for (size_t i = 0; i < r->nsites; i++) {
            r->sites[i].total = r->sites[i].min = r->sites[i].max = 0;
            r->sites[i].nranks = 0;
        }
        for (size_t i = 0; i < r->nrows; i++) {
            int rc = merge_file(r, r->files[r->rows[i].chosen].path, r->rows[i].chosen, 1);
            if (rc != 0) {
                ranks_free(r);
                return rc;
            }
            r->rows[i].folded = r->rows[i].chosen;
        }
    }
    /* Rows in rank order; files and sites refer to rows by index. */
    size_t *order = malloc((r->nrows ? r->nrows : 1) * sizeof *order);
    struct rank_row *sorted = malloc((r->nrows ? r->nrows : 1) * sizeof *sorted);
    if (order == NULL || sorted == NULL) {
        free(order);
        free(sorted);
        fprintf(stderr, "cumemtrace: cannot merge snapshots: out of memory\n");
        ranks_free(r);
        return CLI_ENOMEM;
    }
    memcpy(sorted, r->rows, r->nrows * sizeof *sorted);
    qsort(sorted, r->nrows, sizeof *sorted, by_rank);
    for (size_t i = 0; i < r->nrows; i++)
        order[r->files[sorted[i].chosen].row] = i;
    for (size_t i = 0; i < r->nfiles; i++)
        r->files[i].row = order[r->files[i].row];
    for (size_t i = 0; i < r->nsites; i++)
        r->sites[i].max_row = order[r->sites[i].max_row];
    memcpy(r->rows, sorted, r->nrows * sizeof *sorted);
    free(order);
    free(sorted);
    return 0;
}

enum ranks_moment ranks_best(const struct ranks *r)
{
    bool peak = r->nrows > 0, now = r->nrows > 0;
    for (size_t i = 0; i < r->nrows; i++) {
        peak = peak && r->rows[i].peak_tensors;
        now = now && r->rows[i].now_tensors;
    }
    return peak ? RANKS_TENSORS_PEAK : now ? RANKS_TENSORS_NOW : RANKS_SEGMENTS;
}

void ranks_use(struct ranks *r, enum ranks_moment m)
{
    size_t k = 0;
    for (size_t i = 0; i < r->nsites; i++)
        if (r->sites[i].moment == m)
            r->sites[k++] = r->sites[i];
    r->nsites = k;
    r->moment = m;
}

void ranks_free(struct ranks *r)
{
    free(r->files);
    free(r->rows);
    free(r->sites);
    hmap_free(&r->row_keys);
    hmap_free(&r->site_keys);
    arena_free(&r->arena);
    memset(r, 0, sizeof *r);
}

size_t ranks_find(const struct ranks *r, int64_t rank)
{
    for (size_t i = 0; i < r->nrows; i++)
        if (r->rows[i].rank == rank)
            return i;
    return RANKS_NONE;
}

const char *ranks_name(const struct rank_row *row, char *buf, size_t n)
{
    if (row->rank != SNAP_UNKNOWN_I64)
        snprintf(buf, n, "rank %" PRId64, row->rank);
    else if (row->pid != SNAP_UNKNOWN_I64)
        snprintf(buf, n, "pid %" PRId64 "%s%s", row->pid, row->host ? " on " : "",
                 row->host ? row->host : "");
    else
        snprintf(buf, n, "an unnamed process");
    return buf;
}

static const struct ranks *sort_r;

static int by_total(const void *a, const void *b)
{
    const struct rank_site *x = &sort_r->sites[*(const size_t *)a];
    const struct rank_site *y = &sort_r->sites[*(const size_t *)b];
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    int c = strcmp(x->display, y->display);
    if (c != 0)
        return c;
    return strcmp(x->callers, y->callers);
}

size_t *ranks_sites_sorted(const struct ranks *r)
{
    size_t *v = malloc((r->nsites ? r->nsites : 1) * sizeof *v);
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < r->nsites; i++)
        v[i] = i;
    sort_r = r;
    qsort(v, r->nsites, sizeof *v, by_total);
    return v;
}
