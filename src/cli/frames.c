/* frames.c - see frames.h for the naming rules.
 *
 * Cost: a 100 000-stack snapshot has millions of frame references but a few
 * thousand distinct symbols, and __cxa_demangle costs microseconds, so each
 * raw frame (module, offset, symbol / file, line, function) is looked up in
 * a hash first, and each distinct symbol is demangled once.
 */
#include "frames.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From libstdc++ (the Itanium C++ ABI); declared here so that the tool stays
 * C and needs no C++ header. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
                            int *status);

char *frames_demangle(const char *sym)
{
    /* Only Itanium names start with _Z; asking the demangler about "main"
     * or "cudaMalloc" is wasted time (it would refuse them anyway). */
    if (sym == NULL || sym[0] != '_' || sym[1] != 'Z')
        return NULL;
    int status = -1;
    char *out = __cxa_demangle(sym, NULL, NULL, &status);
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The raw identity of a frame as read: interned pointers + numbers.  Built
 * with memset so that padding bytes hash equal. */
struct raw_key {
    const char *module;
    const char *symbol;
    const char *function;
    uint64_t offset;
    int64_t line;
    uint32_t type;
    uint32_t pad;
};

static const char *demangled_of(struct snapctx *ctx, const char *symbol)
{
    uint32_t idx;
    if (hmap_find(&ctx->demangled, &symbol, sizeof symbol, &idx))
        return ctx->demangled_names[idx];
    char *d = frames_demangle(symbol);
    const char *name = d ? snapshot_intern(ctx, d, strlen(d)) : symbol;
    free(d);
    if (name == NULL)
        return NULL;
    if (snapshot_vec_reserve((void **)&ctx->demangled_names, &ctx->demangled_cap,
                             sizeof *ctx->demangled_names, ctx->ndemangled + 1))
        return NULL;
    idx = (uint32_t)ctx->ndemangled;
    uint32_t got;
    if (hmap_get_or_add(&ctx->demangled, &symbol, sizeof symbol, idx, &got, NULL))
        return NULL;
    ctx->demangled_names[ctx->ndemangled++] = name;
    return name;
}

/* Finds or adds the frame for a raw key; name_fn builds its name on a miss. */
static uint32_t intern(struct snapctx *ctx, const struct raw_key *k,
                       const char *module_shown, bool named)
{
    uint32_t idx;
    if (hmap_find(&ctx->frames_by_key, k, sizeof *k, &idx))
        return idx;

    char small[512];
    char *big = NULL;
    const char *name = NULL;
    int n = 0;
    const char *mod = k->module ? k->module : "[unknown]";
    switch (k->type) {
    case FRAME_NATIVE:
        if (k->symbol != NULL) {
            const char *d = demangled_of(ctx, k->symbol);
            if (d == NULL)
                return FRAMES_NONE;
            n = snprintf(small, sizeof small, "%s!%s", mod, d);
            if ((size_t)n >= sizeof small) {
                big = malloc((size_t)n + 1);
                if (big == NULL)
                    return FRAMES_NONE;
                snprintf(big, (size_t)n + 1, "%s!%s", mod, d);
            }
        } else {
            n = snprintf(small, sizeof small, "%s+0x%" PRIx64, mod, k->offset);
        }
        break;
    case FRAME_PYTHON: {
        const char *file = k->module ? k->module : "?";
        const char *fn = k->function ? k->function : "?";
        if (k->line >= 0)
            n = snprintf(small, sizeof small, "%s:%" PRId64 ":%s", file, k->line, fn);
        else
            n = snprintf(small, sizeof small, "%s:%s", file, fn);
        if ((size_t)n >= sizeof small) {
            big = malloc((size_t)n + 1);
            if (big == NULL)
                return FRAMES_NONE;
            if (k->line >= 0)
                snprintf(big, (size_t)n + 1, "%s:%" PRId64 ":%s", file, k->line, fn);
            else
                snprintf(big, (size_t)n + 1, "%s:%s", file, fn);
        }
        break;
    }
    default: {
        const char *t = k->function ? k->function : "";
        n = snprintf(small, sizeof small, "[%s]", t);
        if ((size_t)n >= sizeof small) {
            big = malloc((size_t)n + 1);
            if (big == NULL)
                return FRAMES_NONE;
            snprintf(big, (size_t)n + 1, "[%s]", t);
        }
        break;
    }
    }
    const char *text = big ? big : small;
    const char *stored;
    uint32_t next = (uint32_t)ctx->nframes;
    int rc = hmap_get_or_add(&ctx->names, text, (size_t)n, next, &idx, &stored);
    free(big);
    if (rc != 0)
        return FRAMES_NONE;
    name = stored;
    if (idx == next) {
        const char *display = name;
        if (k->type == FRAME_PYTHON) {
            const char *slash = strrchr(name, '/');
            /* Only a slash inside the file part, before ":line:". */
            if (slash != NULL && k->module != NULL &&
                (size_t)(slash - name) < strlen(k->module)) {
                display = snapshot_intern(ctx, slash + 1, strlen(slash + 1));
                if (display == NULL)
                    return FRAMES_NONE;
            }
        }
        if (snapshot_vec_reserve((void **)&ctx->frames, &ctx->frames_cap,
                                 sizeof *ctx->frames, ctx->nframes + 1))
            return FRAMES_NONE;
        struct frame *f = &ctx->frames[ctx->nframes++];
        f->name = name;
        f->display = display;
        f->module = module_shown;
        f->type = (uint8_t)k->type;
        f->named = named;
    }
    uint32_t got;
    if (hmap_get_or_add(&ctx->frames_by_key, k, sizeof *k, idx, &got, NULL))
        return FRAMES_NONE;
    return idx;
}

static int intern_opt(struct snapctx *ctx, const char *s, const char **out)
{
    *out = NULL;
    if (s == NULL)
        return 0;
    *out = snapshot_intern(ctx, s, strlen(s));
    return *out ? 0 : -1;
}

uint32_t frames_native(struct snapctx *ctx, const char *module, uint64_t offset,
                       const char *symbol)
{
    struct raw_key k;
    memset(&k, 0, sizeof k);
    k.type = FRAME_NATIVE;
    if (intern_opt(ctx, module, &k.module) || intern_opt(ctx, symbol, &k.symbol))
        return FRAMES_NONE;
    if (k.symbol == NULL)
        k.offset = offset;
    /* With a symbol the offset is not part of the identity: two call sites
     * in one function print the same, and must match across rebuilds. */
    return intern(ctx, &k, k.module ? k.module : "[unknown]", k.symbol != NULL);
}

uint32_t frames_python(struct snapctx *ctx, const char *file, int64_t line,
                       const char *function)
{
    struct raw_key k;
    memset(&k, 0, sizeof k);
    k.type = FRAME_PYTHON;
    k.line = line < 0 ? -1 : line;
    if (intern_opt(ctx, file, &k.module) || intern_opt(ctx, function, &k.function))
        return FRAMES_NONE;
    return intern(ctx, &k, k.module ? k.module : "?", true);
}

uint32_t frames_marker(struct snapctx *ctx, const char *text)
{
    struct raw_key k;
    memset(&k, 0, sizeof k);
    k.type = FRAME_MARKER;
    if (intern_opt(ctx, text, &k.function))
        return FRAMES_NONE;
    return intern(ctx, &k, NULL, false);
}

int frames_label_pos(const struct snapctx *ctx, const struct snap_stack *st)
{
    int named = -1, any = -1;
    for (uint32_t i = 0; i < st->nframes; i++) {
        const struct frame *f = &ctx->frames[st->frames[i]];
        if (f->type == FRAME_PYTHON)
            return (int)i;
        if (f->named && named < 0)
            named = (int)i;
        if (f->type != FRAME_MARKER && any < 0)
            any = (int)i;
    }
    return named >= 0 ? named : any;
}

const struct site *frames_site_get(const struct snapctx *ctx, enum site_by by,
                                   uint32_t id)
{
    return &ctx->sites[by][id];
}

/* Builds the site key of a stack into a malloc'd buffer of pointers. */
static const char **site_key(const struct snapctx *ctx, const struct snap_stack *st,
                             enum site_by by, size_t *n, const char **label,
                             const char **display)
{
    int pos = frames_label_pos(ctx, st);
    const char **key = malloc((st->nframes + 2) * sizeof *key);
    if (key == NULL)
        return NULL;
    size_t k = 0;
    if (by == BY_MODULE) {
        const char *mod = NULL;
        for (uint32_t i = 0; i < st->nframes && mod == NULL; i++)
            mod = ctx->frames[st->frames[i]].module;
        *label = mod;
        *display = mod;
        if (mod != NULL) {
            /* A Python frame's module is its file: show the basename. */
            const char *slash = strrchr(mod, '/');
            *display = slash ? slash + 1 : mod;
        }
        key[k++] = mod;
    } else {
        *label = pos >= 0 ? ctx->frames[st->frames[pos]].name : NULL;
        *display = pos >= 0 ? ctx->frames[st->frames[pos]].display : NULL;
        if (by == BY_FUNCTION) {
            key[k++] = *label;
        } else {
            bool any_named = false;
            for (uint32_t i = 0; i < st->nframes; i++)
                if (ctx->frames[st->frames[i]].type != FRAME_NATIVE ||
                    ctx->frames[st->frames[i]].named)
                    any_named = true;
            key[k++] = st->entry;
            for (uint32_t i = 0; i < st->nframes; i++) {
                const struct frame *f = &ctx->frames[st->frames[i]];
                if (!any_named || f->type != FRAME_NATIVE || f->named)
                    key[k++] = f->name;
            }
        }
    }
    if (*label == NULL)
        *label = *display = st->entry ? st->entry : "[no frames]";
    if (by != BY_STACK)
        key[0] = *label;
    *n = k;
    return key;
}

uint32_t frames_site(struct snapshot *s, uint32_t stack, enum site_by by)
{
    struct snapctx *ctx = s->ctx;
    struct snap_stack *st = NULL;
    size_t n;
    const char *label, *display;
    const char **key;
    if (stack == SNAP_NO_STACK) {
        /* Groups the file did not attribute (a null stack) form one site. */
        label = display = "[no stack]";
        key = malloc(sizeof *key);
        if (key == NULL)
            return FRAMES_NONE;
        key[0] = NULL;
        n = 1;
    } else {
        st = &s->stacks[stack];
        if (st->site[by] != FRAMES_NONE)
            return st->site[by];
        key = site_key(ctx, st, by, &n, &label, &display);
        if (key == NULL)
            return FRAMES_NONE;
    }
    uint32_t next = (uint32_t)ctx->nsites[by], id;
    int rc = hmap_get_or_add(&ctx->site_keys[by], key, n * sizeof *key, next, &id, NULL);
    free(key);
    if (rc != 0)
        return FRAMES_NONE;
    if (id == next) {
        if (snapshot_vec_reserve((void **)&ctx->sites[by], &ctx->sites_cap[by],
                                 sizeof *ctx->sites[by], ctx->nsites[by] + 1))
            return FRAMES_NONE;
        struct site *site = &ctx->sites[by][ctx->nsites[by]++];
        site->label = label;
        site->display = display;
        site->stack = stack;
        site->snap = s;
    }
    if (st != NULL)
        st->site[by] = id;
    return id;
}

const char *frames_group_label(struct snapshot *s, uint32_t stack, enum site_by by)
{
    uint32_t id = frames_site(s, stack, by);
    if (id == FRAMES_NONE)
        return NULL;
    return s->ctx->sites[by][id].label;
}
