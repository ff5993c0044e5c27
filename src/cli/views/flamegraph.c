/* flamegraph.c - `cumemtrace flamegraph FILE`: folded stacks, weighted in
 * bytes, the input of flamegraph.pl, inferno and speedscope.
 *
 * One line per distinct chain: "root;...;innermost frame;entry BYTES".  The
 * snapshot stores frames innermost first, so each chain is written
 * reversed; the CUDA entry point is the leaf.  Frames print as frames.h
 * names, with ';' (the separator) replaced by ':' and line breaks by
 * blanks.  Lines are merged when equal and sorted, so the output is
 * deterministic.  With several devices (and no --device), each line starts
 * with a "device N" frame.  The bytes of `--at peak` sum to the devices'
 * peak_bytes, because at_peak does.
 *
 * In a PyTorch process whose snapshot has its tensors (holders.h) the
 * lines are PyTorch's live blocks instead: one per group, its whole Python
 * stack (library frames included, down to the innermost frame, no CUDA
 * leaf) weighted by the group's bytes, autograd's blocks as their holder
 * names them ("[backward of model.py:142:forward, MmBackward0]"), the
 * writer's folded tail as "[N more lines]" and PyTorch's cache as one
 * "[PyTorch's cache]" line: `--at peak` sums to max_memory_allocated plus
 * the cache then, `--at live` and `--at oom` to what PyTorch reserved.
 * --segments draws the driver's segments as before.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "esc.h"
#include "frames.h"
#include "hmap.h"
#include "holders.h"
#include "out.h"

enum at { AT_PEAK, AT_LIVE, AT_OOM };

/* Lines are merged by identity first (device, entry point, frame indices:
 * frames with equal names share an index), and their text is built once
 * per distinct line at the end; a 100 000-stack snapshot would otherwise
 * hash megabytes of repeated frame text. */
struct line {
    int64_t device;       /* or INT64_MIN without a device frame */
    uint32_t stack;       /* a stack of the line, SNAP_NO_STACK for none */
    uint64_t bytes;
    char *text;           /* built at output */
};

struct folded {
    struct arena arena;
    struct hmap ids;      /* identity -> index in lines */
    struct line *lines;
    size_t n, cap;
    char *key;            /* scratch: one identity */
    size_t key_cap;
};

/* How many devices the output shows: each gets its own root when more
 * than one does. */
static size_t devices_shown(const struct snapshot *s, bool one_device, int64_t device)
{
    size_t shown = 0;
    for (size_t i = 0; i < s->ndevices; i++)
        if (!one_device || s->devices[i].ordinal == device)
            shown++;
    return shown;
}

static int add_group(struct folded *fo, const struct snapshot *s, const struct snap_group *g,
                     int64_t device)
{
    if (g->bytes == 0)
        return 0;
    const struct snap_stack *st = g->stack != SNAP_NO_STACK ? &s->stacks[g->stack] : NULL;
    uint32_t nf = st ? st->nframes : 0;
    size_t klen = sizeof device + sizeof(const char *) + nf * sizeof(uint32_t);
    if (snapshot_vec_reserve((void **)&fo->key, &fo->key_cap, 1, klen))
        return -1;
    const char *entry = st ? st->entry : NULL;
    memcpy(fo->key, &device, sizeof device);
    memcpy(fo->key + sizeof device, &entry, sizeof entry);
    if (nf > 0)
        memcpy(fo->key + sizeof device + sizeof entry, st->frames, nf * sizeof(uint32_t));
    uint32_t idx, next = (uint32_t)fo->n;
    if (hmap_get_or_add(&fo->ids, fo->key, klen, next, &idx, NULL))
        return -1;
    if (idx == next) {
        if (snapshot_vec_reserve((void **)&fo->lines, &fo->cap, sizeof *fo->lines, fo->n + 1))
            return -1;
        fo->lines[fo->n++] = (struct line){device, g->stack, 0, NULL};
    }
    uint64_t *b = &fo->lines[idx].bytes;
    *b = *b > UINT64_MAX - g->bytes ? UINT64_MAX : *b + g->bytes;
    return 0;
}

/* Appends s to the growing text, with ';' (the separator) made ':' and
 * what a terminal must not see escaped (esc.h: line breaks too, which
 * would split a folded line). */
static int put(char **buf, size_t *len, size_t *cap, const char *s, bool sep)
{
    char *esc = NULL;
    if (!esc_clean(s)) {
        esc = malloc(ESC_ROOM(strlen(s)));
        if (esc == NULL)
            return -1;
        esc_text(s, esc);
        s = esc;
    }
    size_t n = strlen(s);
    if (snapshot_vec_reserve((void **)buf, cap, 1, *len + n + 2)) {
        free(esc);
        return -1;
    }
    if (sep)
        (*buf)[(*len)++] = ';';
    for (size_t i = 0; i < n; i++)
        (*buf)[(*len)++] = s[i] == ';' ? ':' : s[i];
    (*buf)[*len] = '\0';
    free(esc);
    return 0;
}

static char *line_text(const struct snapshot *s, const struct line *l)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    bool first = true;
    if (l->device != INT64_MIN) {
        char root[48];
        snprintf(root, sizeof root, "device %" PRId64, l->device);
        if (put(&buf, &len, &cap, root, false))
            goto fail;
        first = false;
    }
    if (l->stack == SNAP_NO_STACK) {
        if (put(&buf, &len, &cap, "[no stack]", !first))
            goto fail;
        return buf;
    }
    const struct snap_stack *st = &s->stacks[l->stack];
    for (uint32_t i = st->nframes; i-- > 0;) {
        if (put(&buf, &len, &cap, s->ctx->frames[st->frames[i]].name, !first))
            goto fail;
        first = false;
    }
    if (put(&buf, &len, &cap, st->entry, !first))
        goto fail;
    return buf;
fail:
    free(buf);
    return NULL;
}

static int by_text(const void *a, const void *b)
{
    return strcmp((*(const struct line *const *)a)->text, (*(const struct line *const *)b)->text);
}

static int add_groups(struct folded *fo, const struct snapshot *s, const struct snap_groups *g,
                      int64_t device)
{
    for (size_t i = 0; i < g->n; i++)
        if (add_group(fo, s, &g->v[i], device) != 0)
            return -1;
    return 0;
}

/* Writes the folded lines of s to f; returns 0, -1 on OOM. */
static int fold(FILE *f, const struct snapshot *s, enum at at, bool one_device,
                int64_t device)
{
    struct folded fo;
    memset(&fo, 0, sizeof fo);
    arena_init(&fo.arena);
    hmap_init(&fo.ids, &fo.arena);
    int rc = 0;
    if (at == AT_OOM) {
        rc = add_groups(&fo, s, &s->oom.live, INT64_MIN);
    } else {
        size_t shown = devices_shown(s, one_device, device);
        for (size_t i = 0; i < s->ndevices && rc == 0; i++) {
            const struct snap_device *d = &s->devices[i];
            if (one_device && d->ordinal != device)
                continue;
            rc = add_groups(&fo, s, at == AT_PEAK ? &d->at_peak : &d->live,
                            shown > 1 ? d->ordinal : INT64_MIN);
        }
    }
    struct line **order = NULL;
    if (rc == 0 && fo.n > 0) {
        order = malloc(fo.n * sizeof *order);
        if (order == NULL)
            rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < fo.n; i++) {
        fo.lines[i].text = line_text(s, &fo.lines[i]);
        if (fo.lines[i].text == NULL)
            rc = -1;
        order[i] = &fo.lines[i];
    }
    if (rc == 0) {
        if (fo.n > 1)
            qsort(order, fo.n, sizeof *order, by_text);
        for (size_t i = 0; i < fo.n; i++)
            fprintf(f, "%s %" PRIu64 "\n", order[i]->text, order[i]->bytes);
    }
    for (size_t i = 0; i < fo.n; i++)
        free(fo.lines[i].text);
    free(order);
    free(fo.lines);
    free(fo.key);
    hmap_free(&fo.ids);
    arena_free(&fo.arena);
    return rc;
}

/* ---- PyTorch's tensors ---- */

struct tline {
    char *text;
    uint64_t bytes;
};

struct tlines {
    struct tline *v;
    size_t n, cap;
};

/* Adds one line: the root frame (device), then names[0..n) as given
 * (outermost first). */
static int tline_add(struct tlines *tl, int64_t device, const char *const *names, size_t n,
                     uint64_t bytes)
{
    if (bytes == 0)
        return 0;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    bool first = true;
    if (device != INT64_MIN) {
        char root[48];
        snprintf(root, sizeof root, "device %" PRId64, device);
        if (put(&buf, &len, &cap, root, false))
            goto fail;
        first = false;
    }
    for (size_t i = 0; i < n; i++) {
        if (put(&buf, &len, &cap, names[i], !first))
            goto fail;
        first = false;
    }
    if (snapshot_vec_reserve((void **)&tl->v, &tl->cap, sizeof *tl->v, tl->n + 1))
        goto fail;
    tl->v[tl->n++] = (struct tline){buf, bytes};
    return 0;
fail:
    free(buf);
    return -1;
}

/* One line per group of t (whole stack, outermost first), the folded tail
 * and the cache. */
static int tensor_lines(struct tlines *tl, struct snapshot *s, const struct snap_tensors *t,
                        int64_t device)
{
    const char **names = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < t->n; i++) {
        const struct snap_tgroup *g = &t->v[i];
        size_t n = g->nframes ? g->nframes : 1;
        if (snapshot_vec_reserve((void **)&names, &cap, sizeof *names, n)) {
            rc = -1;
            break;
        }
        if (g->nframes == 0) {
            names[0] = holders_group_name(s, g, false);
            if (names[0] == NULL) {
                rc = -1;
                break;
            }
        }
        for (uint32_t k = 0; k < g->nframes; k++)
            names[k] = s->ctx->frames[g->frames[g->nframes - 1 - k]].name;
        rc = tline_add(tl, device, names, n, g->bytes);
    }
    free(names);
    char text[64];
    if (rc == 0 && t->has_more) {
        snprintf(text, sizeof text, "[%" PRIu64 " more lines]", t->more_groups);
        const char *one[] = {text};
        rc = tline_add(tl, device, one, 1, t->more_bytes);
    }
    if (rc == 0 && t->has_cache && t->cache_bytes != SNAP_UNKNOWN) {
        const char *one[] = {"[PyTorch's cache]"};
        rc = tline_add(tl, device, one, 1, t->cache_bytes);
    }
    return rc;
}

static int by_tline(const void *a, const void *b)
{
    return strcmp(((const struct tline *)a)->text, ((const struct tline *)b)->text);
}

/* Writes the tensors' folded lines, merged when equal and sorted. */
static int tensor_write(FILE *f, struct tlines *tl)
{
    if (tl->n > 1)
        qsort(tl->v, tl->n, sizeof *tl->v, by_tline);
    for (size_t i = 0; i < tl->n;) {
        uint64_t b = 0;
        size_t j = i;
        for (; j < tl->n && strcmp(tl->v[j].text, tl->v[i].text) == 0; j++)
            b = b > UINT64_MAX - tl->v[j].bytes ? UINT64_MAX : b + tl->v[j].bytes;
        fprintf(f, "%s %" PRIu64 "\n", tl->v[i].text, b);
        i = j;
    }
    return 0;
}

/* The tensors' lines of s at `at` when the file has them (and --segments
 * was not given): 1 written, 0 the file has none (the caller draws the
 * segments), -1 out of memory. */
static int fold_tensors(FILE *f, struct snapshot *s, enum at at, bool one_device,
                        int64_t device)
{
    enum holders_moment m = at == AT_OOM ? HOLDERS_OOM : at == AT_PEAK ? HOLDERS_PEAK
                                                                        : HOLDERS_NOW;
    struct tlines tl = {NULL, 0, 0};
    int rc = 0;
    bool any = false;
    if (m == HOLDERS_OOM) {
        const struct snap_tensors *t = holders_tensors(s, NULL, m);
        if (t != NULL && t->present) {
            any = true;
            rc = tensor_lines(&tl, s, t, INT64_MIN);
        }
    } else {
        size_t shown = devices_shown(s, one_device, device);
        for (size_t i = 0; i < s->ndevices && rc == 0; i++) {
            const struct snap_device *d = &s->devices[i];
            if (one_device && d->ordinal != device)
                continue;
            const struct snap_tensors *t = holders_tensors(s, d, m);
            if (t == NULL || !t->present)
                continue;
            any = true;
            rc = tensor_lines(&tl, s, t, shown > 1 ? d->ordinal : INT64_MIN);
        }
    }
    if (rc == 0 && any)
        rc = tensor_write(f, &tl);
    for (size_t i = 0; i < tl.n; i++)
        free(tl.v[i].text);
    free(tl.v);
    return rc < 0 ? -1 : any ? 1 : 0;
}

/* Whether some device of s has PyTorch's tensors at the dump. */
static bool live_tensors(const struct snapshot *s)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (holders_have_tensors(s, &s->devices[i], HOLDERS_NOW))
            return true;
    return false;
}

static const char usage[] =
    "usage: cumemtrace flamegraph [--at peak|live|oom] [--device N] [--segments] FILE\n"
    "\n"
    "Prints folded stacks weighted in bytes, one line per call chain,\n"
    "\"root;...;leaf BYTES\": the input of flamegraph.pl, inferno-flamegraph\n"
    "and speedscope.  In a PyTorch process, PyTorch's live tensors: each\n"
    "group's whole Python stack, and PyTorch's cache as one line; otherwise\n"
    "(or with --segments) the driver's allocations, the CUDA entry point as\n"
    "the leaf (for PyTorch: which line created each cached segment).\n"
    "\n"
    "  --at peak    what each call site held at the device's peak (default)\n"
    "  --at live    what was still allocated when the snapshot was taken\n"
    "  --at oom     what was allocated at the failure (OOM post-mortems)\n"
    "  --device N   only device N (with several devices and no --device,\n"
    "               each line starts with a \"device N\" frame)\n"
    "  --segments   the driver's allocations even where PyTorch's tensors are known\n"
    "\n"
    "example: cumemtrace flamegraph cumemtrace.python.4242.json | flamegraph.pl \\\n"
    "             --countname bytes > peak.svg\n";

int flamegraph_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"at", required_argument, NULL, 'a'},
        {"device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    enum at at = AT_PEAK;
    bool one_device = false;
    uint64_t device = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            if (strcmp(optarg, "peak") == 0)
                at = AT_PEAK;
            else if (strcmp(optarg, "live") == 0)
                at = AT_LIVE;
            else if (strcmp(optarg, "oom") == 0)
                at = AT_OOM;
            else
                return cli_usage("flamegraph", "--at wants peak, live or oom, not '%s'",
                                 optarg);
            break;
        case 'd':
            if (cli_parse_count(optarg, &device) != 0 || device > INT32_MAX)
                return cli_usage("flamegraph", "--device wants a device ordinal, not '%s'",
                                 optarg);
            one_device = true;
            break;
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("flamegraph", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("flamegraph", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cli_usage("flamegraph", "wants one snapshot file");
    struct cli_inputs in;
    if (cli_load(&in, argv + optind, 1) != 0)
        return CLI_EXIT_ERROR;
    struct snapshot *s = in.snaps[0];
    if (at == AT_OOM && !s->oom.present) {
        struct cli_error err;
        errors_set(&err, CLI_ENOOOM, "flamegraph: '%s' is not an OOM post-mortem (reason %s)",
                   snapshot_display(s->ctx, s->file), snapshot_display(s->ctx, s->reason));
        errors_print(&err);
        cli_inputs_free(&in);
        return CLI_EXIT_ERROR;
    }
    if (one_device && snapshot_device(s, (int64_t)device) == NULL && at != AT_OOM) {
        fprintf(stderr, "cumemtrace: flamegraph: '%s' has no device %" PRIu64 "\n",
                snapshot_display(s->ctx, s->file), device);
        cli_inputs_free(&in);
        return CLI_EXIT_ERROR;
    }
    /* --segments (cli_frame_args): holders_tensors gives none */
    int rc = fold_tensors(stdout, s, at, one_device, (int64_t)device);
    if (rc == 0 && at == AT_PEAK && live_tensors(s))
        fprintf(stderr, "cumemtrace: flamegraph: '%s' has PyTorch's tensors but none at the "
                "peak (PyTorch's layer reads them by default; not under CUMEMTRACE_TORCH_PEAK=0, "
                "nor when its trace did not reach the peak exactly): these are "
                "the driver's segments at the peak, by the line that created each; --at "
                "live draws the tensors\n", snapshot_display(s->ctx, s->file));
    if (rc == 0)
        rc = fold(stdout, s, at, one_device, (int64_t)device);
    else if (rc == 1)
        rc = 0;
    cli_inputs_free(&in);
    if (rc != 0) {
        fprintf(stderr, "cumemtrace: flamegraph: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    return cli_finish_stdout() ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
