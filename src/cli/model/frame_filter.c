/* frame_filter.c - see frame_filter.h. */
#include "frame_filter.h"

#include <regex.h>
#include <string.h>

static struct {
    bool all_frames, python_only, native_only, hide_set, focus_set;
    bool keep_framework; /* export: other tools fold what they like */
    regex_t hide, focus;
    const char *focus_text;
} filter;

void frame_filter_show(bool all_frames, bool python_only, bool native_only)
{
    filter.all_frames = all_frames;
    filter.python_only = python_only;
    filter.native_only = native_only;
}

void frame_filter_keep_framework(bool keep)
{
    filter.keep_framework = keep;
}

int frame_filter_regex(bool focus, const char *re)
{
    regex_t *r = focus ? &filter.focus : &filter.hide;
    bool *set = focus ? &filter.focus_set : &filter.hide_set;
    if (*set)
        regfree(r);
    *set = false;
    if (regcomp(r, re, REG_EXTENDED | REG_NOSUB) != 0)
        return -1;
    *set = true;
    if (focus)
        filter.focus_text = re;
    return 0;
}

/* The interpreter's evaluation machinery: native frames of CPython itself
 * (the python executable or libpython) whose Python frames stand beside
 * them, and its unnamed frames. */
static bool interpreter(const struct frame *f)
{
    const char *m = f->module ? f->module : "";
    if (strncmp(m, "python", 6) != 0 && strncmp(m, "libpython", 9) != 0)
        return false;
    const char *bang = strchr(f->name, '!');
    const char *fn = bang ? bang + 1 : "";
    return !f->named || strncmp(fn, "_Py", 3) == 0 || strncmp(fn, "Py", 2) == 0 ||
           strncmp(fn, "pymain", 6) == 0 || strncmp(fn, "run_", 4) == 0 ||
           strncmp(fn, "_start", 6) == 0 || strncmp(fn, "main", 4) == 0;
}

static bool startup(const struct frame *f)
{
    const char *m = f->module ? f->module : "";
    const char *bang = strchr(f->name, '!');
    const char *fn = bang ? bang + 1 : "";
    return (strncmp(m, "libc.so", 7) == 0 && strncmp(fn, "__libc_start", 12) == 0) ||
           strncmp(m, "ld-linux", 8) == 0 || strcmp(fn, "_start") == 0 ||
           (strncmp(m, "libc.so", 7) == 0 && !f->named);
}

/* An autograd node's own frame (torch::autograd::generated::MulBackward0::
 * apply, or a Python-defined Function's PyNode): what backward was doing,
 * the one frame of autograd's thread a reader needs. */
bool frame_filter_autograd_node(const char *name)
{
    const char *g = strstr(name, "torch::autograd::generated::");
    return (g != NULL && strstr(g, "::apply(") != NULL) ||
           strstr(name, "torch::autograd::PyNode::apply(") != NULL;
}

static bool prefixed(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strncmp(s, *list, strlen(*list)) == 0)
            return true;
    return false;
}

/* The machinery between the user's code and the CUDA call, which every
 * PyTorch stack repeats: the dispatcher and operators (at::, c10::), the
 * caching allocator and its mutex, the autograd engine, the bindings
 * (pybind11, torch::autograd's Python glue), the C++ runtime, the CUDA
 * runtime and this tool.  Folded like the interpreter's frames:
 * rows that differ only in them merge.  An autograd node's frame stays. */
static bool framework(const struct frame *f)
{
    static const char *const modules[] = {"libc10", "libtorch", "libcudart", "libcuda.so",
                                          "libcumemtrace", "libstdc++", "libgcc_s",
                                          "libpthread", NULL};
    static const char *const symbols[] = {"c10::", "at::", "torch::", "pybind11::", "std::",
                                          "__gnu_cxx::", "void std::", "void c10::",
                                          "void at::", NULL};
    const char *m = f->module ? f->module : "";
    const char *bang = strchr(f->name, '!');
    const char *fn = bang ? bang + 1 : f->name;
    if (frame_filter_autograd_node(fn))
        return false;
    if (prefixed(m, modules))
        return true;
    return f->named && prefixed(fn, symbols);
}

/* A Python frame of torch's own package (module.py's _call_impl and
 * _apply chains, functional.py): the user's line that called into it is the
 * one to read, as in the `tensors:` lines.  Recognised by an installed
 * package's path; a source checkout elsewhere is not. */
static bool torch_python(const struct frame *f)
{
    const char *file = f->module ? f->module : "";
    return strstr(file, "/site-packages/torch/") != NULL ||
           strstr(file, "/dist-packages/torch/") != NULL;
}

static bool keep(const struct frame *f)
{
    if (f->type == FRAME_MARKER)
        return !filter.native_only;
    if (filter.python_only && f->type != FRAME_PYTHON)
        return false;
    if (filter.native_only && f->type == FRAME_PYTHON)
        return false;
    if (!filter.all_frames && f->type == FRAME_NATIVE &&
        (interpreter(f) || startup(f) || (!filter.keep_framework && framework(f))))
        return false;
    if (!filter.all_frames && !filter.keep_framework && f->type == FRAME_PYTHON &&
        torch_python(f))
        return false;
    if (filter.hide_set && regexec(&filter.hide, f->name, 0, NULL, 0) == 0)
        return false;
    return true;
}

#define NO_FRAME UINT32_MAX

/* Whether a kept frame says where the allocation came from. */
static bool informative(const struct frame *f)
{
    return f->type == FRAME_PYTHON || (f->type == FRAME_NATIVE && f->named);
}

size_t frame_filter_apply(const struct snapctx *ctx, uint32_t *frames, size_t n)
{
    /* The innermost named native frame, in case the filter leaves nothing
     * that names a place (a stack all inside the framework). */
    uint32_t named = NO_FRAME;
    for (size_t i = 0; i < n && named == NO_FRAME; i++)
        if (ctx->frames[frames[i]].type == FRAME_NATIVE && ctx->frames[frames[i]].named)
            named = frames[i];
    size_t k = 0;
    bool told = false;
    for (size_t i = 0; i < n; i++) {
        /* The options are set once, before any file is read: a frame's
         * verdict is worked out the first time and kept with it (most
         * frames recur in many stacks). */
        struct frame *f = &ctx->frames[frames[i]];
        if (f->shown == 0)
            f->shown = keep(f) ? 1 : 2;
        if (f->shown == 1) {
            told |= informative(f);
            frames[k++] = frames[i];
        }
    }
    if (!told && named != NO_FRAME && ctx->frames[named].shown == 2 && !filter.python_only &&
        !filter.hide_set) {
        /* k < n: that frame was dropped.  It goes back first, innermost. */
        memmove(frames + 1, frames, k * sizeof *frames);
        frames[0] = named;
        k++;
    }
    if (k == 0 && n > 0) /* keep the innermost rather than an empty stack */
        k = 1;
    return k;
}

bool frame_filter_focused(const struct snapctx *ctx, const uint32_t *frames, size_t n)
{
    if (!filter.focus_set)
        return true;
    for (size_t i = 0; i < n; i++)
        if (regexec(&filter.focus, ctx->frames[frames[i]].name, 0, NULL, 0) == 0)
            return true;
    return false;
}

const char *frame_filter_focus_text(void)
{
    return filter.focus_set ? filter.focus_text : NULL;
}

static void focus_groups(const struct snapshot *s, struct snap_groups *g)
{
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].stack != SNAP_NO_STACK && !s->stacks[g->v[i].stack].unfocused)
            g->v[k++] = g->v[i];
    g->n = k;
}

/* PyTorch's groups by user line: the sums stay as written (the totals
 * are the whole process's, as above); the groups out of focus go. */
static void focus_tgroups(struct snap_tgroup *v, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (!v[i].unfocused)
            v[k++] = v[i];
    *n = k;
}

void frame_filter_focus(struct snapshot *s)
{
    if (!filter.focus_set)
        return;
    for (size_t d = 0; d < s->ndevices; d++) {
        focus_groups(s, &s->devices[d].live);
        focus_groups(s, &s->devices[d].at_peak);
        focus_groups(s, &s->devices[d].churn);
        focus_tgroups(s->devices[d].tensors.v, &s->devices[d].tensors.n);
        focus_tgroups(s->devices[d].peak_tensors.v, &s->devices[d].peak_tensors.n);
        focus_tgroups(s->devices[d].growth.v, &s->devices[d].growth.n);
        focus_tgroups(s->devices[d].allocator.tensors.v, &s->devices[d].allocator.tensors.n);
    }
    focus_tgroups(s->oom.allocator.tensors.v, &s->oom.allocator.tensors.n);
    focus_groups(s, &s->host.live);
    focus_groups(s, &s->host.at_peak);
    focus_groups(s, &s->oom.live);
    focus_groups(s, &s->oom.released);
    for (size_t i = 0; i < s->events.n; i++) {
        struct snap_event *e = &s->events.v[i];
        uint32_t st = e->stack_id > 0 ? snapshot_stack_index(s, e->stack_id) : SNAP_NO_STACK;
        e->unfocused = st == SNAP_NO_STACK || s->stacks[st].unfocused;
    }
}
