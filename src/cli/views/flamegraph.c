/* flamegraph.c - `cumemtrace flamegraph FILE`: folded stacks, weighted in
 * bytes, the input of flamegraph.pl, inferno and speedscope; docs/cli.md's
 * `flamegraph` section says which lines it writes and what they sum to.
 *
 * The snapshot stores frames innermost first, so each chain is written
 * reversed.  Lines are merged when equal and sorted, so the output is
 * deterministic.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "esc.h"
#include "frames.h"
#include "holders.h"
#include "out.h"

enum at { AT_PEAK, AT_LIVE, AT_OOM };

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

struct line {
    char *text;
    uint64_t bytes;
};

struct lines {
    struct line *v;
    size_t n, cap;
};

/* Adds one line: the root frame (device), then names[0..n) as given
 * (outermost first). */
static int line_add(struct lines *tl, int64_t device, const char *const *names, size_t n,
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
    tl->v[tl->n++] = (struct line){buf, bytes};
    return 0;
fail:
    free(buf);
    return -1;
}

/* One line per group of t (whole stack, outermost first), the folded tail
 * and the cache. */
static int tensor_lines(struct lines *tl, struct snapshot *s, const struct snap_tensors *t,
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
        rc = line_add(tl, device, names, n, g->bytes);
    }
    free(names);
    char text[64];
    if (rc == 0 && t->has_more) {
        snprintf(text, sizeof text, "[%" PRIu64 " more lines]", t->more_groups);
        const char *one[] = {text};
        rc = line_add(tl, device, one, 1, t->more_bytes);
    }
    if (rc == 0 && t->has_cache && t->cache_bytes != SNAP_UNKNOWN) {
        const char *one[] = {"[PyTorch's cache]"};
        rc = line_add(tl, device, one, 1, t->cache_bytes);
    }
    return rc;
}

static int by_line(const void *a, const void *b)
{
    return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

/* Writes the folded lines, merged when equal and sorted. */
static void lines_write(FILE *f, struct lines *tl)
{
    if (tl->n > 1)
        qsort(tl->v, tl->n, sizeof *tl->v, by_line);
    for (size_t i = 0; i < tl->n;) {
        uint64_t b = 0;
        size_t j = i;
        for (; j < tl->n && strcmp(tl->v[j].text, tl->v[i].text) == 0; j++)
            b = b > UINT64_MAX - tl->v[j].bytes ? UINT64_MAX : b + tl->v[j].bytes;
        fprintf(f, "%s %" PRIu64 "\n", tl->v[i].text, b);
        i = j;
    }
}

/* The driver's groups g as lines: each stack's frames outermost first, its
 * CUDA entry point the leaf. */
static int group_lines(struct lines *tl, const struct snapshot *s, const struct snap_groups *g,
                       int64_t device)
{
    const char **names = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g->n; i++) {
        const struct snap_stack *st =
            g->v[i].stack != SNAP_NO_STACK ? &s->stacks[g->v[i].stack] : NULL;
        uint32_t nf = st ? st->nframes : 0;
        if (snapshot_vec_reserve((void **)&names, &cap, sizeof *names, nf + 1u)) {
            rc = -1;
            break;
        }
        for (uint32_t k = 0; k < nf; k++)
            names[k] = s->ctx->frames[st->frames[nf - 1 - k]].name;
        names[nf] = st ? st->entry : "[no stack]";
        rc = line_add(tl, device, names, nf + 1u, g->v[i].bytes);
    }
    free(names);
    return rc;
}

/* Writes the lines of s at `at`: with `tensors` PyTorch's, where the file
 * has them (and --segments was not given), else the driver's groups.
 * 1 written, 0 the file has no tensors (the caller draws the segments),
 * -1 out of memory. */
static int fold(FILE *f, struct snapshot *s, enum at at, bool one_device, int64_t device,
                bool tensors)
{
    enum holders_moment m = at == AT_OOM ? HOLDERS_OOM : at == AT_PEAK ? HOLDERS_PEAK
                                                                        : HOLDERS_NOW;
    struct lines tl = {NULL, 0, 0};
    int rc = 0;
    bool any = !tensors;
    size_t shown = devices_shown(s, one_device, device);
    /* the failure's holders are one set, no device's (d NULL) */
    for (size_t i = 0; i < (m == HOLDERS_OOM ? 1 : s->ndevices) && rc == 0; i++) {
        const struct snap_device *d = m == HOLDERS_OOM ? NULL : &s->devices[i];
        if (d != NULL && one_device && d->ordinal != device)
            continue;
        int64_t root = d != NULL && shown > 1 ? d->ordinal : INT64_MIN;
        const struct snap_tensors *t = tensors ? holders_tensors(s, d, m) : NULL;
        if (t != NULL && t->present) {
            any = true;
            rc = tensor_lines(&tl, s, t, root);
        } else if (!tensors) {
            rc = group_lines(&tl, s, d == NULL ? &s->oom.live
                                     : m == HOLDERS_PEAK ? &d->at_peak : &d->live, root);
        }
    }
    if (rc == 0 && any)
        lines_write(f, &tl);
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
    int rc = fold(stdout, s, at, one_device, (int64_t)device, true);
    if (rc == 0 && at == AT_PEAK && live_tensors(s))
        fprintf(stderr, "cumemtrace: flamegraph: '%s' has PyTorch's tensors but none at the "
                "peak (PyTorch's layer reads them by default; not under CUMEMTRACE_TORCH_PEAK=0, "
                "nor when its trace did not reach the peak exactly): these are "
                "the driver's segments at the peak, by the line that created each; --at "
                "live draws the tensors\n", snapshot_display(s->ctx, s->file));
    if (rc == 0)
        rc = fold(stdout, s, at, one_device, (int64_t)device, false);
    cli_inputs_free(&in);
    if (rc < 0) {
        fprintf(stderr, "cumemtrace: flamegraph: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    return cli_finish_stdout() ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
