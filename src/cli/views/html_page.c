/* html_page.c - the page around the model: src/cli/views/html/report.html with
 * its @TITLE@, @STYLE@, @DATA@ and @SCRIPT@ slots filled.  The assets are
 * compiled in ($(BUILD)/gen/html_assets.h, made from src/cli/html/ by the
 * Makefile), so the page needs no file or network at view time.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "html.h"
#include "html_assets.h"
#include "outfile.h"

/* Whether two snapshots come from one process: its pid on one host. */
static bool same_process(const struct snapshot *a, const struct snapshot *b)
{
    const char *ha = a->process.host ? a->process.host : "";
    const char *hb = b->process.host ? b->process.host : "";
    return a->process.pid == b->process.pid && strcmp(ha, hb) == 0;
}

void html_title(char *buf, size_t len, struct snapshot **s, size_t n, const char *kind)
{
    const char *exe = s[0]->process.exe ? s[0]->process.exe : "unknown program";
    size_t procs = 0; /* distinct processes: one's OOM and exit files are one */
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = same_process(s[k], s[i]);
        procs += !seen;
    }
    if (strcmp(kind, "diff") == 0 && procs == 1 && n > 1)
        snprintf(buf, len, "cumemtrace diff: %s (pid %" PRId64 ", %zu snapshots)", exe,
                 s[0]->process.pid, n);
    else if (strcmp(kind, "diff") == 0)
        snprintf(buf, len, "cumemtrace diff: %s", exe);
    else if (n == 1)
        snprintf(buf, len, "cumemtrace: %s (pid %" PRId64 ")", exe, s[0]->process.pid);
    else if (procs == 1)
        snprintf(buf, len, "cumemtrace: %s (pid %" PRId64 ") - %zu snapshots", exe,
                 s[0]->process.pid, n);
    else if (procs < n)
        snprintf(buf, len, "cumemtrace: %s - %zu snapshots of %zu processes", exe, n, procs);
    else
        snprintf(buf, len, "cumemtrace: %s - %zu processes", exe, n);
}

static void put_escaped_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* JSON inside <script> must contain no "<" at all: "</script" ends the
 * element, and "<!--" followed by "<script" puts the HTML parser in a state
 * where the next "</script>" (our data block's own) no longer ends it, so
 * the page's script is swallowed into the data.  A "<"
 * of this JSON can only be inside a string, where "\u003c" is the same
 * character. */
static void put_script_json(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '<') {
            fputs("\\u003c", f);
        } else {
            fputc(s[i], f);
        }
    }
}

int html_page_write(const char *path, const char *title, struct snapshot **s, size_t n,
                    const char *kind)
{
    char *model = NULL;
    size_t model_len = 0;
    FILE *mf = open_memstream(&model, &model_len);
    if (mf == NULL) {
        fprintf(stderr, "cumemtrace: html: out of memory\n");
        return -1;
    }
    struct json_out w;
    json_out_init(&w, mf, false);
    int rc = html_model_write(&w, s, n, kind);
    if (fclose(mf) != 0 || rc != 0) {
        free(model);
        fprintf(stderr, "cumemtrace: html: out of memory building the page\n");
        return -1;
    }
    const char *cmd = strcmp(kind, "diff") == 0 ? "diff" : "html";
    struct outfile of;
    struct cli_error oerr = {0, ""};
    if (outfile_open(&of, cmd, path, true, &oerr) != 0) {
        errors_print(&oerr);
        free(model);
        return -1;
    }
    FILE *f = of.f;
    const char *p = html_template;
    for (;;) {
        const char *at = strchr(p, '@');
        if (at == NULL) {
            fputs(p, f);
            break;
        }
        fwrite(p, 1, (size_t)(at - p), f);
        if (strncmp(at, "@TITLE@", 7) == 0) {
            put_escaped_text(f, title);
            p = at + 7;
        } else if (strncmp(at, "@STYLE@", 7) == 0) {
            fputs(html_style, f);
            p = at + 7;
        } else if (strncmp(at, "@DATA@", 6) == 0) {
            put_script_json(f, model, model_len);
            p = at + 6;
        } else if (strncmp(at, "@SCRIPT@", 8) == 0) {
            fputs(html_script, f);
            p = at + 8;
        } else {
            fputc('@', f);
            p = at + 1;
        }
    }
    free(model);
    if (outfile_commit(&of, cmd, &oerr) != 0) {
        errors_print(&oerr);
        return -1;
    }
    return 0;
}
