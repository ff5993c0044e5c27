/* snapshot_read.c - JSON snapshot (docs/snapshot-format.md) -> struct snapshot:
 * the document, its header and which error a broken file gets.  The parts:
 * reader.c reads values by field tables, snapshot_sections.c and
 * snapshot_bulk.c hold the tables of the format, snapshot_check.c the
 * cross-field invariants checked once the model is read.
 *
 * One pass reads the model, streaming: stacks, groups and events go
 * straight into compact structs (a large snapshot is mostly frames; a JSON
 * tree of it would be several times the file).  Each broken file must get
 * the one message that tells its real cause, in this order of precedence:
 * truncated or not JSON (the first such place in the file), JSON but not a
 * cumemtrace snapshot, a newer version, then a field of the wrong type or
 * value ("devices[0].peak_bytes is a string").  The pass meets these in
 * file order, not in that order, so when it stops at a field it has not
 * yet seen the rest: only then (the error path) a second, validating pass
 * over the whole document decides which message wins.
 *
 * Leniency (docs/cli.md): unknown fields are skipped; a missing field reads
 * as null/0/empty; null is accepted where the format says a value may be
 * unknown, and for every time and process field.  Stacks may come after
 * the groups that reference them (the doc lists `stacks` last), so group
 * stack ids are resolved at the end, and an id that no stack has is an
 * error, not a silent "unknown".
 */
#include "snapshot_read.h"
#include "stream_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame_filter.h"
#include "input.h"
#include "reader.h"
#include "snapshot_bulk.h"
#include "snapshot_check.h"
#include "snapshot_sections.h"

/* Whether the document says it is ours, in a version we read. */
static int judge_header(struct reader *r, bool ours, bool have_version, bool version_int,
                        int64_t version)
{
    if (!ours)
        return errors_set(r->err, CLI_EFOREIGN,
                          "cannot read snapshot '%s': JSON but not a cumemtrace "
                          "snapshot (no \"format\": \"cumemtrace\")",
                          r->name);
    if (!have_version || !version_int)
        return errors_set(r->err, CLI_ETYPE,
                          "cannot read snapshot '%s': \"version\" is %s, expected an integer",
                          r->name, have_version ? "not an integer" : "missing");
    if (version > SNAP_FORMAT_VERSION)
        return errors_set(r->err, CLI_EVERSION,
                          "cannot read snapshot '%s': format version %lld is newer than "
                          "this cumemtrace understands (version %d)",
                          r->name, (long long)version, SNAP_FORMAT_VERSION);
    if (version < 1)
        return errors_set(r->err, CLI_EVALUE,
                          "cannot read snapshot '%s': format version %lld does not exist",
                          r->name, (long long)version);
    return 0;
}

/* The error path's second look: is the whole document JSON, and does it
 * say it is ours?  Writes nothing into buf. */
static int check_header(struct reader *r, char *buf, size_t len, int64_t *version)
{
    struct arena scratch;
    arena_init(&scratch);
    json_init(&r->c, buf, len, &scratch, false);
    struct json_cursor *c = &r->c;
    const char *format = NULL;
    bool have_version = false, version_int = false;
    int rc;
    enum json_type top = json_peek(c);
    if (top == JSON_OBJECT) {
        rc = json_enter_object(c);
        const char *key;
        while (rc == JSON_OK && (rc = json_next_member(c, &key, NULL)) == 1) {
            if (strcmp(key, "format") == 0 && json_peek(c) == JSON_STRING) {
                rc = json_get_string(c, &format, NULL);
            } else if (strcmp(key, "version") == 0) {
                have_version = true;
                version_int = json_get_int64(c, version) == JSON_OK;
                rc = version_int ? JSON_OK : json_skip(c);
            } else {
                rc = json_skip(c);
            }
        }
    } else {
        rc = json_skip(c);
    }
    if (rc >= 0)
        rc = json_finish(c);
    if (rc < 0) {
        rc = reader_json_failed(r);
        arena_free(&scratch);
        return rc;
    }
    bool ours = format != NULL && strcmp(format, "cumemtrace") == 0;
    arena_free(&scratch);
    if (top != JSON_OBJECT)
        return errors_set(r->err, CLI_EFOREIGN,
                          "cannot read snapshot '%s': JSON but not a cumemtrace "
                          "snapshot (the document is %s, not an object)",
                          r->name, reader_type_text(top));
    return judge_header(r, ours, have_version, version_int, *version);
}

/* mapped: buf is a private mapping of the file (map_file), whose pages
 * the pass may give back behind itself. */
static int read_doc(struct snapctx *ctx, const char *name, char *buf, size_t len,
                    bool mapped, struct snapshot *out, struct cli_error *err)
{
    struct reader r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.s = out;
    r.err = err;
    r.name = name;
    r.len = len;
    arena_init(&r.scratch);
    hmap_init(&r.raw_frames, &r.scratch);
    hmap_init(&r.frame_bytes, &r.scratch);
    snapshot_sections_init(out, ctx, name, len);
    snapshot_bulk_init(&r);

    /* Nothing is written into buf: a page of the file that is only read
     * stays the page cache's (no copy), and the error path below reads
     * the document as it was.  Strings the reader keeps are interned;
     * reader_raw's go to the scratch arena. */
    json_init(&r.c, buf, len, &r.scratch, false);
    if (mapped)
        reader_release_init(&r);
    int rc = snapshot_sections_read(&r);
    if (rc == 0 && json_finish(&r.c) != JSON_OK)
        rc = reader_json_failed(&r);
    if (rc == 0)
        rc = judge_header(&r, r.format != NULL && strcmp(r.format, "cumemtrace") == 0,
                          r.have_version, r.version_int, r.version);
    if (rc == 0)
        rc = snapshot_check(out, err);
    if (rc == 0) /* the file's invariants hold; now the view's focus */
        frame_filter_focus(out);
    if (rc == CLI_ETYPE || rc == CLI_EVALUE || rc == CLI_EBADREF || rc == CLI_EINVARIANT) {
        /* A field is wrong; but if the file is also cut short, not JSON
         * further on, foreign or too new, that is the message to give:
         * look at the whole document. */
        struct cli_error first = *err;
        int64_t version;
        int hrc = check_header(&r, buf, len, &version);
        if (hrc == 0)
            *err = first;
        else
            rc = hrc;
    }
    if (rc != 0)
        goto fail;
    out->version = r.version;
    if (out->reason == NULL)
        out->reason = "unknown";
    if (out->events.stride == 0 || out->events.stride == SNAP_UNKNOWN)
        out->events.stride = 1;
    rc = 0;
fail:
    free(r.tmp);
    free(r.key);
    hmap_free(&r.frame_bytes);
    free(r.mods);
    free(r.expand);
    hmap_free(&r.raw_frames);
    arena_free(&r.scratch);
    if (rc != 0)
        snapshot_free(out);
    return rc;
}

int snapshot_read_mem(struct snapctx *ctx, const char *name, char *buf,
                      size_t len, struct snapshot *out, struct cli_error *err)
{
    return read_doc(ctx, name, buf, len, false, out, err);
}

int snapshot_read_file(struct snapctx *ctx, const char *path,
                       struct snapshot *out, struct cli_error *err)
{
    struct input in;
    memset(out, 0, sizeof *out);
    int rc = input_load(path, "snapshot", &in, err);
    if (rc != 0)
        return rc;
    char *buf = in.buf;
    size_t len = in.len;
    bool mapped = in.maplen > 0;
    char why[768];
    why[0] = '\0';
    if (stream_is(buf, len)) { /* a killed process's stream: its last checkpoint */
        char *doc;
        size_t dlen;
        struct stream_info info;
        rc = stream_recover(path, buf, len, &doc, &dlen, &info, err);
        input_free(&in);
        if (rc != 0)
            return rc;
        stream_staleness(&info, why, sizeof why);
        in.buf = buf = doc; /* malloc'd: input_free frees it */
        len = dlen;
        mapped = false;
    }
    rc = read_doc(ctx, path, buf, len, mapped, out, err);
    input_free(&in);
    /* after the document read: a broken one gets its one error line only */
    if (rc == 0 && why[0] != '\0')
        errors_line("cumemtrace: ", "%s: recovered from a stream: %s", path, why);
    /* kept for views that cannot print to stderr (the HTML page) */
    if (rc == 0 && why[0] != '\0' &&
        (out->recovered = arena_strndup(&ctx->arena, why, strlen(why))) == NULL)
        rc = errors_set(err, CLI_ENOMEM, "cannot read '%s': out of memory", path);
    return rc;
}
