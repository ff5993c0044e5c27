/* frames.c - see frames.h for the naming rules.
 *
 * Cost: a 100 000-stack snapshot has millions of frame references but far
 * fewer distinct frames, and __cxa_demangle costs microseconds.  The reader
 * keeps a map from a frame's raw bytes to its index, so these functions run
 * once per distinct frame; each distinct symbol is demangled once.
 */
#include "frames.h"
#include "frame_filter.h"

#include <inttypes.h>
#include <stdarg.h>
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

/* The demangled form of a symbol, demangling each distinct symbol once. */
static const char *demangled_of(struct snapctx *ctx, const char *symbol)
{
    size_t n = strlen(symbol);
    uint32_t idx;
    if (hmap_find(&ctx->demangled, symbol, n, &idx))
        return ctx->demangled_names[idx];
    char *d = frames_demangle(symbol);
    const char *name = snapshot_intern(ctx, d ? d : symbol, strlen(d ? d : symbol));
    free(d);
    if (name == NULL)
        return NULL;
    if (snapshot_vec_reserve((void **)&ctx->demangled_names, &ctx->demangled_cap,
                             sizeof *ctx->demangled_names, ctx->ndemangled + 1))
        return NULL;
    uint32_t got;
    if (hmap_get_or_add(&ctx->demangled, symbol, n, (uint32_t)ctx->ndemangled, &got, NULL))
        return NULL;
    ctx->demangled_names[ctx->ndemangled++] = name;
    return name;
}

/* An autograd node's frame reads "autograd: MulBackward0" (the name
 * PyTorch's own tracebacks give the node), not the libtorch_cpu.so!
 * torch::autograd::generated::MulBackward0::apply(...) it is. */
static void autograd_display(struct snapctx *ctx, struct frame *f)
{
    const char *bang = strchr(f->name, '!');
    const char *fn = bang ? bang + 1 : f->name;
    if (!frame_filter_autograd_node(fn))
        return;
    static const char gen[] = "torch::autograd::generated::";
    const char *node = strstr(fn, gen);
    node = node ? node + sizeof gen - 1 : "PyNode";
    size_t len = strcspn(node, ":(");
    char text[160];
    int n = snprintf(text, sizeof text, "autograd: %.*s", (int)(len < 120 ? len : 120), node);
    const char *d = n > 0 ? snapshot_intern(ctx, text, (size_t)n) : NULL;
    if (d != NULL)
        f->display = snapshot_display(ctx, d);
}

/* snprintf into a buffer that grows: small names need no malloc. */
struct namebuf {
    char small[512];
    char *p;
    size_t n;
};

__attribute__((format(printf, 2, 3))) static int name_printf(struct namebuf *b,
                                                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->small, sizeof b->small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    b->p = b->small;
    b->n = (size_t)n;
    if ((size_t)n < sizeof b->small)
        return 0;
    b->p = malloc((size_t)n + 1);
    if (b->p == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return 0;
}

static void name_free(struct namebuf *b)
{
    if (b->p != b->small)
        free(b->p);
}

/* Finds or adds the frame called b (rc: name_printf's result), freeing b;
 * display_off is where its display form starts within the name. */
static uint32_t add_frame(struct snapctx *ctx, struct namebuf *b, int rc,
                          size_t display_off, const char *module, enum frame_type type,
                          bool named)
{
    uint32_t idx, next = (uint32_t)ctx->nframes;
    const char *stored;
    if (rc != 0)
        return FRAMES_NONE;
    rc = hmap_get_or_add(&ctx->names, b->p, b->n, next, &idx, &stored);
    name_free(b);
    if (rc != 0)
        return FRAMES_NONE;
    if (idx != next)
        return idx;
    if (snapshot_vec_reserve((void **)&ctx->frames, &ctx->frames_cap, sizeof *ctx->frames,
                             ctx->nframes + 1))
        return FRAMES_NONE; /* the name stays mapped to an index never filled:
                               the caller gives up on the whole load */
    struct frame *f = &ctx->frames[ctx->nframes++];
    f->name = stored;
    /* The display form is a suffix of the stored name (no copy) unless it
     * holds what a terminal must not see (snapshot_display). */
    f->display = snapshot_display(ctx, stored + display_off);
    f->module = module;
    f->type = (uint8_t)type;
    f->named = named;
    f->shown = 0;
    if (type == FRAME_NATIVE && named)
        autograd_display(ctx, f);
    return idx;
}

uint32_t frames_native(struct snapctx *ctx, const char *module, uint64_t offset,
                       const char *symbol)
{
    const char *mod = snapshot_intern(ctx, module ? module : "[unknown]",
                                      strlen(module ? module : "[unknown]"));
    if (mod == NULL)
        return FRAMES_NONE;
    struct namebuf b;
    int rc;
    /* With a symbol the offset is not part of the name: two call sites in
     * one function print the same, and match across rebuilds. */
    if (symbol != NULL) {
        const char *d = demangled_of(ctx, symbol);
        if (d == NULL)
            return FRAMES_NONE;
        rc = name_printf(&b, "%s!%s", mod, d);
    } else {
        rc = name_printf(&b, "%s+0x%" PRIx64, mod, offset);
    }
    return add_frame(ctx, &b, rc, 0, mod, FRAME_NATIVE, symbol != NULL);
}

uint32_t frames_source(struct snapctx *ctx, const char *module, const char *function,
                       const char *file, int line, int inlined)
{
    const char *mod = snapshot_intern(ctx, module ? module : "[unknown]",
                                      strlen(module ? module : "[unknown]"));
    if (mod == NULL || function == NULL)
        return FRAMES_NONE;
    const char *d = demangled_of(ctx, function);
    if (d == NULL)
        return FRAMES_NONE;
    /* The file by its basename: the identity survives a moved build tree. */
    const char *base = file ? strrchr(file, '/') : NULL;
    base = base ? base + 1 : file;
    struct namebuf b;
    int rc = base != NULL && line > 0
                 ? name_printf(&b, "%s!%s at %s:%d%s", mod, d, base, line,
                               inlined ? " (inlined)" : "")
                 : name_printf(&b, "%s!%s%s", mod, d, inlined ? " (inlined)" : "");
    return add_frame(ctx, &b, rc, 0, mod, FRAME_NATIVE, true);
}

uint32_t frames_python(struct snapctx *ctx, const char *file, int64_t line,
                       const char *function)
{
    const char *f = snapshot_intern(ctx, file ? file : "?", strlen(file ? file : "?"));
    if (f == NULL)
        return FRAMES_NONE;
    const char *fn = function ? function : "?";
    struct namebuf b;
    int rc = line >= 0 ? name_printf(&b, "%s:%" PRId64 ":%s", f, line, fn)
                       : name_printf(&b, "%s:%s", f, fn);
    /* Shown by the file's basename; the full path stays the identity. */
    const char *slash = strrchr(f, '/');
    return add_frame(ctx, &b, rc, slash ? (size_t)(slash + 1 - f) : 0, f, FRAME_PYTHON, true);
}

uint32_t frames_marker(struct snapctx *ctx, const char *text)
{
    struct namebuf b;
    int rc = name_printf(&b, "[%s]", text ? text : "");
    return add_frame(ctx, &b, rc, 0, NULL, FRAME_MARKER, false);
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
    const char *none[1] = {NULL}, **key = none;
    if (stack == SNAP_NO_STACK) {
        /* Groups the file did not attribute (a null stack) form one site. */
        label = display = "[no stack]";
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
    if (key != none)
        free(key);
    if (rc != 0)
        return FRAMES_NONE;
    if (id == next) {
        if (snapshot_vec_reserve((void **)&ctx->sites[by], &ctx->sites_cap[by],
                                 sizeof *ctx->sites[by], ctx->nsites[by] + 1))
            return FRAMES_NONE;
        struct site *site = &ctx->sites[by][ctx->nsites[by]++];
        site->label = label;
        site->display = snapshot_display(ctx, display);
        site->stack = stack;
        site->snap = s;
    }
    if (st != NULL)
        st->site[by] = id;
    return id;
}

char *frames_site_text(struct snapshot *s, uint32_t stack, enum site_by by, size_t *len)
{
    const char *label, *display, *none = "[no stack]";
    size_t n = 1;
    const char **key = stack == SNAP_NO_STACK
                           ? &none
                           : site_key(s->ctx, &s->stacks[stack], by, &n, &label, &display);
    if (key == NULL)
        return NULL;
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total += (key[i] ? strlen(key[i]) : 0) + 1;
    char *out = malloc(total), *p = out;
    if (out != NULL) {
        for (size_t i = 0; i < n; i++) {
            size_t l = key[i] ? strlen(key[i]) : 0;
            memcpy(p, key[i] ? key[i] : "", l);
            p += l;
            *p++ = '\n';
        }
        *p = '\0';
        *len = (size_t)(p - out);
    }
    if (key != &none)
        free(key);
    return out;
}

const char *frames_group_label(struct snapshot *s, uint32_t stack, enum site_by by)
{
    uint32_t id = frames_site(s, stack, by);
    if (id == FRAMES_NONE)
        return NULL;
    return s->ctx->sites[by][id].label;
}

/* Frames of process start-up: libc's __libc_start_main, the loader,
 * _start. */
static bool startup(const struct frame *fr)
{
    const char *m = fr->module ? fr->module : "";
    size_t n = strlen(fr->name);
    return strncmp(m, "libc.so", 7) == 0 || strncmp(m, "ld-linux", 8) == 0 ||
           (n >= 7 && strcmp(fr->name + n - 7, "!_start") == 0);
}

const char *frames_callers(const struct snapshot *s, uint32_t stack, unsigned max,
                           char *buf, size_t n)
{
    buf[0] = '\0';
    if (stack == SNAP_NO_STACK)
        return buf;
    const struct snapctx *ctx = s->ctx;
    const struct snap_stack *st = &s->stacks[stack];
    int pos = frames_label_pos(ctx, st);
    size_t used = 0;
    unsigned shown = 0;
    for (uint32_t i = (uint32_t)(pos + 1); i < st->nframes && shown < max; i++) {
        const struct frame *fr = &ctx->frames[st->frames[i]];
        /* Unnamed frames between named ones carry no information for a
         * reader; markers do (e.g. "GIL not held").  Neither does process
         * start-up, which every stack ends with. */
        if (fr->type == FRAME_NATIVE && (!fr->named || startup(fr)))
            continue;
        int w = snprintf(buf + used, n - used, "%s< %s", used ? " " : "", fr->display);
        if (w < 0 || (size_t)w >= n - used)
            break;
        used += (size_t)w;
        shown++;
    }
    return buf;
}
