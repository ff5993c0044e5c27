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
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "frames.h"
#include "hmap.h"
#include "out.h"

enum at { AT_PEAK, AT_LIVE, AT_OOM };

struct folded {
    struct arena arena;
    struct hmap lines;   /* chain text -> index */
    const char **text;   /* by index */
    uint64_t *bytes;
    size_t n, cap;
    char *buf;           /* scratch for one chain */
    size_t buf_cap;
};

static int put(struct folded *fo, size_t *len, const char *s, bool sep)
{
    size_t n = strlen(s);
    if (snapshot_vec_reserve((void **)&fo->buf, &fo->buf_cap, 1, *len + n + 2))
        return -1;
    if (sep)
        fo->buf[(*len)++] = ';';
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        fo->buf[(*len)++] = c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
    }
    fo->buf[*len] = '\0';
    return 0;
}

static int add_group(struct folded *fo, const struct snapshot *s, const struct snap_group *g,
                     const char *root)
{
    if (g->bytes == 0)
        return 0;
    size_t len = 0;
    if (put(fo, &len, root ? root : "", false))
        return -1;
    bool first = root == NULL;
    if (g->stack == SNAP_NO_STACK) {
        if (put(fo, &len, "[no stack]", !first))
            return -1;
    } else {
        const struct snap_stack *st = &s->stacks[g->stack];
        for (uint32_t i = st->nframes; i-- > 0;) {
            if (put(fo, &len, s->ctx->frames[st->frames[i]].name, !first))
                return -1;
            first = false;
        }
        if (put(fo, &len, st->entry, !first))
            return -1;
    }
    uint32_t idx, next = (uint32_t)fo->n;
    const char *key;
    if (hmap_get_or_add(&fo->lines, fo->buf, len, next, &idx, &key))
        return -1;
    if (idx == next) {
        if (snapshot_vec_reserve((void **)&fo->text, &fo->cap, sizeof *fo->text, fo->n + 1))
            return -1;
        /* bytes has the same capacity as text. */
        uint64_t *b = realloc(fo->bytes, fo->cap * sizeof *b);
        if (b == NULL)
            return -1;
        fo->bytes = b;
        fo->text[fo->n] = key;
        fo->bytes[fo->n] = 0;
        fo->n++;
    }
    uint64_t *b = &fo->bytes[idx];
    *b = *b > UINT64_MAX - g->bytes ? UINT64_MAX : *b + g->bytes;
    return 0;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

static int add_groups(struct folded *fo, const struct snapshot *s, const struct snap_groups *g,
                      const char *root)
{
    for (size_t i = 0; i < g->n; i++)
        if (add_group(fo, s, &g->v[i], root) != 0)
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
    hmap_init(&fo.lines, &fo.arena);
    int rc = 0;
    if (at == AT_OOM) {
        rc = add_groups(&fo, s, &s->oom.live, NULL);
    } else {
        size_t shown = 0;
        for (size_t i = 0; i < s->ndevices; i++)
            if (!one_device || s->devices[i].ordinal == device)
                shown++;
        for (size_t i = 0; i < s->ndevices && rc == 0; i++) {
            const struct snap_device *d = &s->devices[i];
            if (one_device && d->ordinal != device)
                continue;
            char root[48];
            snprintf(root, sizeof root, "device %" PRId64, d->ordinal);
            rc = add_groups(&fo, s, at == AT_PEAK ? &d->at_peak : &d->live,
                            shown > 1 ? root : NULL);
        }
    }
    const char ***order = NULL;
    if (rc == 0 && fo.n > 0) {
        order = malloc(fo.n * sizeof *order);
        if (order == NULL)
            rc = -1;
    }
    if (rc == 0) {
        for (size_t i = 0; i < fo.n; i++)
            order[i] = &fo.text[i];
        if (fo.n > 1)
            qsort(order, fo.n, sizeof *order, by_text);
        for (size_t i = 0; i < fo.n; i++)
            fprintf(f, "%s %" PRIu64 "\n", *order[i], fo.bytes[order[i] - fo.text]);
    }
    free(order);
    free(fo.text);
    free(fo.bytes);
    free(fo.buf);
    hmap_free(&fo.lines);
    arena_free(&fo.arena);
    return rc;
}

static const char usage[] =
    "usage: cumemtrace flamegraph [--at peak|live|oom] [--device N] FILE\n"
    "\n"
    "Prints folded stacks weighted in bytes, one line per call chain,\n"
    "\"root;...;leaf BYTES\" with the CUDA entry point as the leaf: the input\n"
    "of flamegraph.pl, inferno-flamegraph and speedscope.\n"
    "\n"
    "  --at peak    what each call site held at the device's peak (default)\n"
    "  --at live    what was still allocated when the snapshot was taken\n"
    "  --at oom     what was allocated at the failure (OOM post-mortems)\n"
    "  --device N   only device N (with several devices and no --device,\n"
    "               each line starts with a \"device N\" frame)\n"
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
                   s->file, s->reason);
        errors_print(&err);
        cli_inputs_free(&in);
        return CLI_EXIT_ERROR;
    }
    if (one_device && snapshot_device(s, (int64_t)device) == NULL && at != AT_OOM) {
        fprintf(stderr, "cumemtrace: flamegraph: '%s' has no device %" PRIu64 "\n",
                s->file, device);
        cli_inputs_free(&in);
        return CLI_EXIT_ERROR;
    }
    int rc = fold(stdout, s, at, one_device, (int64_t)device);
    cli_inputs_free(&in);
    if (rc != 0) {
        fprintf(stderr, "cumemtrace: flamegraph: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    return cli_finish_stdout() ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
