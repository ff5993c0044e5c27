/* snapshot.c - lifetime and small queries of the snapshot model. */
#include "snapshot.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "esc.h"
#include "symbolize.h"

#define KIND_NAME(sym, name, on_device, with_context, placed, phrase) name,
const char *const snapshot_kind_names[KIND_COUNT] = {FORMAT_KINDS(KIND_NAME) "other"};
#undef KIND_NAME
#define kind_names snapshot_kind_names
#define KIND_PHRASE(sym, name, on_device, with_context, placed, phrase) phrase,
static const char *const kind_phrases[KIND_OTHER] = {FORMAT_KINDS(KIND_PHRASE)};
#undef KIND_PHRASE

const char *snapshot_kind_phrase(int kind)
{
    return kind >= 0 && kind < KIND_OTHER ? kind_phrases[kind] : "memory";
}

void snapshot_ctx_init(struct snapctx *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    arena_init(&ctx->arena);
    hmap_init(&ctx->strings, &ctx->arena);
    hmap_init(&ctx->names, &ctx->arena);
    hmap_init(&ctx->demangled, &ctx->arena);
    for (int i = 0; i < BY_COUNT; i++)
        hmap_init(&ctx->site_keys[i], &ctx->arena);
    ctx->sym = symbolizer_new();
}

void snapshot_ctx_free(struct snapctx *ctx)
{
    hmap_free(&ctx->strings);
    hmap_free(&ctx->names);
    hmap_free(&ctx->demangled);
    for (int i = 0; i < BY_COUNT; i++) {
        hmap_free(&ctx->site_keys[i]);
        free(ctx->sites[i]);
    }
    free(ctx->frames);
    free(ctx->demangled_names);
    symbolizer_free(ctx->sym);
    arena_free(&ctx->arena);
    memset(ctx, 0, sizeof *ctx);
}

static void groups_free(struct snap_groups *g)
{
    free(g->v);
    memset(g, 0, sizeof *g);
}

static void layout_free(struct snap_layout *l)
{
    free(l->allocations);
    free(l->gaps);
    free(l->segments);
    free(l->blocks);
    free(l->pystacks);
    free(l->pyframes);
}

static void free_tv(struct snap_tensors *t)
{
    free(t->v);
}

void snapshot_free(struct snapshot *s)
{
    if (s == NULL)
        return;
    free(s->process.cmdline);
    free(s->config.limits);
    for (size_t i = 0; i < s->ndevices; i++) {
        groups_free(&s->devices[i].live);
        groups_free(&s->devices[i].at_peak);
        groups_free(&s->devices[i].churn);
        free(s->devices[i].hist);
        layout_free(&s->devices[i].segments);
        free(s->devices[i].by_phase.v);
        free(s->devices[i].by_phase.sites);
        free_tv(&s->devices[i].tensors);
        free_tv(&s->devices[i].peak_tensors);
        free(s->devices[i].growth.v);
        for (size_t k = 0; k < s->devices[i].tensor_series.n; k++)
            free(s->devices[i].tensor_series.v[k].bytes);
        free(s->devices[i].tensor_series.v);
        free(s->devices[i].tensor_series.lines);
        free_tv(&s->devices[i].allocator.tensors);
    }
    free(s->devices);
    free(s->host.by_phase.v);
    free(s->host.by_phase.sites);
    free(s->phases.v);
    free(s->phases.spans);
    groups_free(&s->host.live);
    groups_free(&s->host.at_peak);
    groups_free(&s->oom.live);
    groups_free(&s->oom.released);
    layout_free(&s->oom.layout);
    free_tv(&s->oom.allocator.tensors);
    free(s->ooms.dumps);
    free(s->ooms.attempts);
    free(s->events.v);
    free(s->stacks);
    memset(s, 0, sizeof *s);
}

const char *snapshot_intern(struct snapctx *ctx, const char *s, size_t n)
{
    uint32_t v;
    const char *key;
    if (hmap_get_or_add(&ctx->strings, s, n, 0, &v, &key) != 0)
        return NULL;
    return key;
}

const char *snapshot_display(struct snapctx *ctx, const char *s)
{
    if (s == NULL || esc_clean(s))
        return s;
    size_t n = strlen(s);
    char *buf = malloc(ESC_ROOM(n));
    if (buf == NULL)
        return "?";
    size_t k = esc_text(s, buf);
    const char *d = snapshot_intern(ctx, buf, k);
    free(buf);
    return d ? d : "?";
}

uint32_t snapshot_stack_index(const struct snapshot *s, int64_t id)
{
    /* the library numbers its stacks 1, 2, ... in the order it writes them */
    if (id >= 1 && (uint64_t)id <= s->nstacks && s->stacks[id - 1].id == id)
        return (uint32_t)(id - 1);
    size_t lo = 0, hi = s->nstacks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->stacks[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->nstacks && s->stacks[lo].id == id)
        return (uint32_t)lo;
    return SNAP_NO_STACK;
}

const char *snapshot_kind_name(int kind)
{
    if (kind < 0 || kind >= KIND_COUNT)
        return "other";
    return kind_names[kind];
}

int snapshot_kind_parse(const char *name)
{
    for (int k = 0; k < KIND_OTHER; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    /* The design notes spell it with a hyphen; accept both spellings. */
    if (strcmp(name, "host-pinned") == 0)
        return KIND_HOST_PINNED;
    return KIND_OTHER;
}

int snapshot_kind_span(const char *s, size_t n)
{
    for (int k = 0; k < KIND_OTHER; k++) {
        const char *name = kind_names[k];
        size_t i = 0;
        while (i < n && name[i] == s[i]) /* name's NUL differs from s[i] */
            i++;
        if (i == n && name[n] == '\0')
            return k;
    }
    if (n == 11 && memcmp(s, "host-pinned", 11) == 0)
        return KIND_HOST_PINNED;
    return KIND_OTHER;
}

const char *snapshot_cause_name(const struct snap_oom *oom)
{
    const char *name = format_cause_name((enum format_cause)oom->cause);
    return name ? name : oom->cause_name ? oom->cause_name : "unknown";
}

const struct snap_device *snapshot_device(const struct snapshot *s, int64_t ordinal)
{
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].ordinal == ordinal)
            return &s->devices[i];
    return NULL;
}

bool snapshot_is_oom(const struct snapshot *s)
{
    return s->oom.present;
}

uint64_t snapshot_max_peak(const struct snapshot *s)
{
    uint64_t m = 0;
    for (size_t i = 0; i < s->ndevices; i++)
        if (s->devices[i].peak_bytes > m)
            m = s->devices[i].peak_bytes;
    return m;
}

int snapshot_vec_reserve(void **v, size_t *cap, size_t elem, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return -1;
        n *= 2;
    }
    void *p = realloc(*v, n * elem);
    if (p == NULL)
        return -1;
    *v = p;
    *cap = n;
    return 0;
}

int snapshot_broken(const struct snapshot *s, struct cli_error *err, const char *rule,
                    const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return errors_set(err, CLI_EINVARIANT,
                      "cannot read snapshot '%s': breaks the invariant \"%s\": %s", s->file,
                      rule, what);
}
