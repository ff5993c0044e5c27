/* recover.c - `cumemtrace recover STREAM [-o OUT] [--force]`: the stream a
 * killed process left (docs/stream-format.md) as an ordinary snapshot,
 * reason "killed", that every command and older tools read.  The result is
 * checked with the snapshot reader before it is written. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "input.h"
#include "outfile.h"
#include "snapshot_read.h"
#include "stream_read.h"

static const char usage[] =
    "usage: cumemtrace recover [-o OUT] [--force] STREAM\n"
    "\n"
    "Turns the stream file a killed process left (cumemtrace.<exe>.<pid>.stream)\n"
    "into an ordinary snapshot with reason \"killed\": its last complete\n"
    "checkpoint, with how stale it is.  OUT defaults to the stream's name with\n"
    ".killed.json for .stream; an existing OUT is an error unless --force.\n"
    "report, diff, flamegraph and timeline also read a stream directly.\n";

int recover_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0}};
    const char *out = NULL;
    bool force = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":ho:f", opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return cli_finish_stdout();
        } else if (c == 'o') {
            out = optarg;
        } else if (c == 'f') {
            force = true;
        } else {
            return cli_usage("recover", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cli_usage("recover", "expected one stream file");
    const char *in = argv[optind];
    struct input src;
    struct cli_error err = {0, ""};
    int rc = input_load(in, "stream", &src, &err);
    if (rc != 0) {
        errors_print(&err);
        return CLI_EXIT_ERROR;
    }
    char *doc;
    size_t dlen;
    struct stream_info info;
    rc = stream_recover(in, src.buf, src.len, &doc, &dlen, &info, &err);
    input_free(&src);
    if (rc != 0) {
        errors_print(&err);
        return CLI_EXIT_ERROR;
    }
    /* what we write must read back as a snapshot */
    char *check = malloc(dlen + 1);
    struct snapctx ctx;
    struct snapshot snap;
    snapshot_ctx_init(&ctx);
    if (check != NULL) {
        memcpy(check, doc, dlen + 1);
        rc = snapshot_read_mem(&ctx, in, check, dlen, &snap, &err);
        if (rc == 0)
            snapshot_free(&snap);
    } else {
        rc = errors_set(&err, CLI_ENOMEM, "cannot check '%s': out of memory", in);
    }
    free(check);
    snapshot_ctx_free(&ctx);
    if (rc != 0) {
        errors_print(&err);
        free(doc);
        return CLI_EXIT_ERROR;
    }
    char name[4096];
    if (out == NULL) {
        size_t l = strlen(in);
        if (l > 7 && strcmp(in + l - 7, ".stream") == 0)
            snprintf(name, sizeof name, "%.*s.killed.json", (int)(l - 7), in);
        else
            snprintf(name, sizeof name, "%s.killed.json", in);
        out = name;
    }
    struct outfile of;
    if (outfile_open(&of, "recover", out, force, &err) != 0) {
        errors_print(&err);
        free(doc);
        return CLI_EXIT_ERROR;
    }
    fwrite(doc, 1, dlen, of.f);
    free(doc);
    if (outfile_commit(&of, "recover", &err) != 0) {
        errors_print(&err);
        return CLI_EXIT_ERROR;
    }
    char why[768];
    stream_staleness(&info, why, sizeof why);
    errors_line("cumemtrace: ", "wrote %s: %s", out, why);
    return CLI_EXIT_OK;
}
