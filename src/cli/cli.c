/* cli.c - see cli.h. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "frame_filter.h"
#include "holders.h"
#include "snapshot_read.h"

static int load(struct cli_inputs *in, char **paths, size_t n, bool rows)
{
    snapshot_ctx_init(&in->ctx);
    in->ctx.no_event_rows = !rows;
    in->n = 0;
    in->snaps = calloc(n ? n : 1, sizeof *in->snaps);
    struct cli_error err = {0, ""};
    int rc = 0;
    if (in->snaps == NULL) {
        rc = errors_set(&err, CLI_ENOMEM, "cannot read snapshots: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        struct snapshot *s = calloc(1, sizeof *s);
        if (s == NULL) {
            rc = errors_set(&err, CLI_ENOMEM, "cannot read snapshot '%s': out of memory",
                            paths[i]);
            goto fail;
        }
        rc = snapshot_read_file(&in->ctx, paths[i], s, &err);
        if (rc != 0) {
            free(s);
            goto fail;
        }
        in->snaps[in->n++] = s;
    }
    return 0;
fail:
    errors_print(&err);
    cli_inputs_free(in);
    return rc;
}

int cli_load(struct cli_inputs *in, char **paths, size_t n)
{
    return load(in, paths, n, true);
}

int cli_load_without_events(struct cli_inputs *in, char **paths, size_t n)
{
    return load(in, paths, n, false);
}

void cli_inputs_free(struct cli_inputs *in)
{
    for (size_t i = 0; i < in->n; i++) {
        snapshot_free(in->snaps[i]);
        free(in->snaps[i]);
    }
    free(in->snaps);
    in->snaps = NULL;
    in->n = 0;
    snapshot_ctx_free(&in->ctx);
}

int cli_parse_count(const char *s, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int cli_parse_by(const char *s)
{
    if (strcmp(s, "stack") == 0)
        return BY_STACK;
    if (strcmp(s, "function") == 0)
        return BY_FUNCTION;
    if (strcmp(s, "module") == 0)
        return BY_MODULE;
    return -1;
}

int cli_finish_stdout(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cumemtrace: cannot write output: %s\n", strerror(errno));
        return CLI_EXIT_ERROR;
    }
    return 0;
}

/* --NAME REGEX or --NAME=REGEX at argv[*i]: 1 when it is that option (the
 * filter's regex set), 0 when not, or a usage error's exit status. */
static int regex_opt(const char *cmd, const char *name, int *i, int argc, char **argv,
                     bool focus)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
        return 0;
    const char *v = a[n] == '=' ? a + n + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (v == NULL)
        return -cli_usage(cmd, "%s needs a regular expression", name);
    if (frame_filter_regex(focus, v) != 0)
        return -cli_usage(cmd, "%s: '%s' is not an extended regular expression", name, v);
    return 1;
}

int cli_frame_args(const char *cmd, int *argc, char **argv)
{
    bool all_frames = false, python_only = false, native_only = false;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--all-frames") == 0) {
            all_frames = true;
        } else if (strcmp(a, "--python-only") == 0) {
            python_only = true;
        } else if (strcmp(a, "--native-only") == 0) {
            native_only = true;
        } else if (strcmp(a, "--segments") == 0) {
            holders_set_segments(true);
        } else {
            int rc = regex_opt(cmd, "--hide", &i, *argc, argv, false);
            if (rc == 0)
                rc = regex_opt(cmd, "--focus", &i, *argc, argv, true);
            if (rc < 0) {
                frame_filter_show(all_frames, python_only, native_only);
                return -rc;
            }
            if (rc == 0)
                argv[out++] = argv[i];
        }
    }
    frame_filter_show(all_frames, python_only, native_only);
    frame_filter_keep_framework(strcmp(cmd, "export") == 0);
    if (python_only && native_only)
        return cli_usage(cmd, "--python-only and --native-only exclude each other");
    *argc = out;
    argv[out] = NULL;
    return 0;
}
