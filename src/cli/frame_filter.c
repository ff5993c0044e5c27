/* frame_filter.c - see frame_filter.h. */
#include "frame_filter.h"

#include <regex.h>
#include <string.h>

#include "cli.h"

static struct {
    bool all_frames, python_only, native_only, hide_set;
    regex_t hide;
} filter;

int frame_filter_args(const char *cmd, int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--all-frames") == 0) {
            filter.all_frames = true;
        } else if (strcmp(a, "--python-only") == 0) {
            filter.python_only = true;
        } else if (strcmp(a, "--native-only") == 0) {
            filter.native_only = true;
        } else if (strcmp(a, "--hide") == 0 || strncmp(a, "--hide=", 7) == 0) {
            const char *re = a[6] == '=' ? a + 7 : (i + 1 < *argc ? argv[++i] : NULL);
            if (re == NULL)
                return cli_usage(cmd, "--hide needs a regular expression");
            if (filter.hide_set)
                regfree(&filter.hide);
            if (regcomp(&filter.hide, re, REG_EXTENDED | REG_NOSUB) != 0)
                return cli_usage(cmd, "--hide: '%s' is not an extended regular "
                                      "expression", re);
            filter.hide_set = true;
        } else {
            argv[out++] = argv[i];
        }
    }
    if (filter.python_only && filter.native_only)
        return cli_usage(cmd, "--python-only and --native-only exclude each other");
    *argc = out;
    argv[out] = NULL;
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

static bool keep(const struct frame *f)
{
    if (f->type == FRAME_MARKER)
        return !filter.native_only;
    if (filter.python_only && f->type != FRAME_PYTHON)
        return false;
    if (filter.native_only && f->type == FRAME_PYTHON)
        return false;
    if (!filter.all_frames && f->type == FRAME_NATIVE && (interpreter(f) || startup(f)))
        return false;
    if (filter.hide_set && regexec(&filter.hide, f->name, 0, NULL, 0) == 0)
        return false;
    return true;
}

size_t frame_filter_apply(const struct snapctx *ctx, uint32_t *frames, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (keep(&ctx->frames[frames[i]]))
            frames[k++] = frames[i];
    if (k == 0 && n > 0) /* keep the innermost rather than an empty stack */
        k = 1;
    return k;
}
