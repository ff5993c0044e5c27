/* test_cli_snapshot.c - the snapshot reader (src/cli/read/snapshot_read.c): each
 * malformed-input class gets its own error, unknown fields are ignored,
 * nulls mean "unknown", and references are resolved whatever the order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot_read.h"

static int read_text(struct snapctx *ctx, const char *text, struct snapshot *s,
                     struct cli_error *err)
{
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    memcpy(buf, text, n + 1);
    int rc = snapshot_read_mem(ctx, "t.json", buf, n, s, err);
    free(buf);
    return rc;
}

/* A minimal valid snapshot; stacks deliberately after the devices. */
static const char good[] =
    "{\"format\": \"cumemtrace\", \"version\": 1, \"reason\": \"exit\",\n"
    " \"future_field\": {\"nested\": [1, 2, {\"x\": null}]},\n"
    " \"process\": {\"pid\": 7, \"rank\": null, \"exe\": \"a.out\", \"cmdline\": [\"a.out\"]},\n"
    " \"devices\": [{\"ordinal\": 1, \"total_bytes\": null, \"current_bytes\": 0,\n"
    "   \"peak_bytes\": 18014398509481985, \"peak_time_ns\": 5,\n"
    "   \"by_kind\": {\"device\": {\"current_bytes\": 0, \"peak_bytes\": 18014398509481985,\n"
    "       \"peak_time_ns\": 5, \"allocs\": 1, \"frees\": 1, \"failures\": 0}},\n"
    "   \"at_peak\": [{\"stack\": 3, \"bytes\": 18014398509481985, \"count\": 1}],\n"
    "   \"live\": [], \"vmm\": null, \"fragmentation\": null}],\n"
    " \"oom\": null,\n"
    " \"events\": {\"stride\": 1, \"columns\": [\"t_ns\",\"device\",\"kind\",\"delta\",\"stack\",\"current\"],\n"
    "   \"data\": [[5, 1, \"device\", 18014398509481985, 3, 18014398509481985],\n"
    "            [6, 1, \"device\", -18014398509481985, null, 0]]},\n"
    " \"stacks\": [{\"id\": 3, \"entry\": \"cudaMalloc\", \"frames\": [\n"
    "   {\"module\": \"a.out\", \"offset\": 4660, \"symbol\": \"_Z3fooi\"},\n"
    "   {\"module\": \"python\", \"file\": \"/x/m.py\", \"line\": 9, \"function\": \"f\"},\n"
    "   {\"marker\": \"m\"}]}]}\n";

static void test_good(void **state)
{
    (void)state;
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot s;
    struct cli_error err;
    assert_int_equal(read_text(&ctx, good, &s, &err), 0);
    assert_int_equal(s.ndevices, 1);
    const struct snap_device *d = &s.devices[0];
    assert_int_equal(d->ordinal, 1);
    assert_true(d->peak_bytes == 18014398509481985ULL); /* 2^54 + 1, exact */
    assert_true(d->total_bytes == SNAP_UNKNOWN);
    assert_true(s.process.rank == SNAP_UNKNOWN_I64);
    assert_int_equal(s.process.pid, 7);
    assert_false(s.oom.present);
    assert_int_equal(s.nstacks, 1);
    assert_int_equal(d->at_peak.n, 1);
    assert_int_equal(d->at_peak.v[0].stack, 0); /* resolved to the index */
    const struct snap_stack *st = &s.stacks[0];
    assert_int_equal(st->nframes, 3);
    assert_string_equal(ctx.frames[st->frames[0]].name, "a.out!foo(int)");
    assert_string_equal(ctx.frames[st->frames[1]].name, "/x/m.py:9:f");
    assert_string_equal(ctx.frames[st->frames[2]].name, "[m]");
    assert_int_equal(s.events.n, 2);
    assert_true(s.events.v[1].delta == -18014398509481985LL);
    assert_int_equal(s.events.v[1].stack_id, 0);
    snapshot_free(&s);
    snapshot_ctx_free(&ctx);
}

/* Replaces the first occurrence of from in good with to, then reads it. */
static int read_edited(const char *from, const char *to, struct cli_error *err)
{
    const char *at = strstr(good, from);
    assert_non_null(at);
    size_t n = strlen(good) - strlen(from) + strlen(to);
    char *text = malloc(n + 1);
    size_t head = (size_t)(at - good);
    memcpy(text, good, head);
    strcpy(text + head, to);
    strcat(text, at + strlen(from));
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot s;
    int rc = read_text(&ctx, text, &s, err);
    if (rc == 0)
        snapshot_free(&s);
    snapshot_ctx_free(&ctx);
    free(text);
    return rc;
}

static void expect(int rc, const struct cli_error *err, int code, const char *needle)
{
    if (rc != code)
        fail_msg("got error code %d (%s), expected %d", rc, err->msg, code);
    if (strstr(err->msg, needle) == NULL)
        fail_msg("message '%s' lacks '%s'", err->msg, needle);
    assert_null(strchr(err->msg, '\n'));
}

static void test_error_classes(void **state)
{
    (void)state;
    struct snapctx ctx;
    struct snapshot s;
    struct cli_error err;
    snapshot_ctx_init(&ctx);

    expect(read_text(&ctx, "", &s, &err), &err, CLI_ETRUNC, "truncated after 0 bytes");
    char cut[200];
    memcpy(cut, good, 199);
    cut[199] = '\0';
    expect(read_text(&ctx, cut, &s, &err), &err, CLI_ETRUNC, "truncated after 199 bytes");
    expect(read_text(&ctx, "PK\x03\x04", &s, &err), &err, CLI_ENOTJSON, "line 1, column 1");
    expect(read_text(&ctx, "{\"a\": 1} trailing", &s, &err), &err, CLI_ENOTJSON, "after the end");
    expect(read_text(&ctx, "[1, 2]", &s, &err), &err, CLI_EFOREIGN, "an array");
    expect(read_text(&ctx, "{\"format\": \"chrome\", \"version\": 1}", &s, &err), &err,
           CLI_EFOREIGN, "not a cumemtrace snapshot");
    /* Precedence: a foreign file that is also cut short is "truncated". */
    expect(read_text(&ctx, "{\"format\": \"chrome\", \"version\": 1", &s, &err), &err,
           CLI_ETRUNC, "truncated");
    snapshot_ctx_free(&ctx);

    expect(read_edited("\"version\": 1", "\"version\": 2", &err), &err, CLI_EVERSION,
           "format version 2 is newer");
    expect(read_edited("\"version\": 1", "\"version\": \"1\"", &err), &err, CLI_ETYPE,
           "\"version\"");
    expect(read_edited("\"peak_bytes\": 18014398509481985, \"peak_time_ns\": 5,\n   \"by_kind\"",
                       "\"peak_bytes\": \"big\", \"peak_time_ns\": 5,\n   \"by_kind\"", &err),
           &err, CLI_ETYPE, "devices[0].peak_bytes is a string, expected a non-negative integer");
    expect(read_edited("\"frees\": 1", "\"frees\": -1", &err), &err, CLI_EVALUE,
           "devices[0].by_kind.device.frees is -1");
    expect(read_edited("\"frees\": 1", "\"frees\": 1.5", &err), &err, CLI_EVALUE, "is 1.5");
    expect(read_edited("\"exe\": \"a.out\"", "\"exe\": 12", &err), &err, CLI_ETYPE,
           "process.exe is a number, expected a string or null");
    expect(read_edited("\"devices\": [", "\"devices\": {\"x\": 1}, \"d2\": [", &err), &err,
           CLI_ETYPE, "devices is an object, expected an array");
    expect(read_edited("{\"stack\": 3, \"bytes\"", "{\"stack\": 4, \"bytes\"", &err), &err,
           CLI_EBADREF, "devices[0].at_peak[0] refers to stack 4");
    expect(read_edited("[6, 1, \"device\", -18014398509481985, null, 0]", "[6, 1]", &err),
           &err, CLI_EVALUE, "events.data[1] has 2 values, expected 6");
    expect(read_edited("\"id\": 3,", "\"id\": 0,", &err), &err, CLI_EVALUE, "stacks[0]");
}

static void test_columns_reordered(void **state)
{
    (void)state;
    struct cli_error err;
    /* Columns in another order (before the data) are honoured. */
    assert_int_equal(read_edited("[\"t_ns\",\"device\",\"kind\",\"delta\",\"stack\",\"current\"]",
                                 "[\"t_ns\",\"device\",\"kind\",\"delta\",\"current\",\"stack\",\"extra\"]",
                                 &err),
                     CLI_EVALUE); /* rows have 6 values, 7 columns named */
    expect(read_edited("\"columns\": [\"t_ns\",\"device\",\"kind\",\"delta\",\"stack\",\"current\"]",
                       "\"columns\": [\"t_ns\",\"device\",\"kind\",\"delta\",\"stack\"]", &err),
           &err, CLI_EVALUE, "must name column \"current\"");
}

static void test_missing_file(void **state)
{
    (void)state;
    struct snapctx ctx;
    struct snapshot s;
    struct cli_error err;
    snapshot_ctx_init(&ctx);
    expect(snapshot_read_file(&ctx, "/nonexistent/x.json", &s, &err), &err, CLI_ENOENT,
           "cannot read snapshot '/nonexistent/x.json'");
    expect(snapshot_read_file(&ctx, "/", &s, &err), &err, CLI_EIO, "Is a directory");
    snapshot_ctx_free(&ctx);
}

/* Frames are memoised by their bytes (snapshot_bulk.c): a repeat reads as
 * the same frame, a '}' inside a string does not cut a frame short, and a
 * repeat of a frame's opening bytes that goes on differently is its own
 * frame. */
static const char memo[] =
    "{\"format\": \"cumemtrace\", \"version\": 1, \"devices\": [],\n"
    " \"stacks\": [\n"
    "  {\"id\": 1, \"frames\": [{\"module\":\"m\",\"offset\":1,\"symbol\":\"f}\"},\n"
    "                        {\"module\":\"m\",\"offset\":2,\"symbol\":null},\n"
    "                        {\"module\":\"m\",\"offset\":2,\"symbol\":null}]},\n"
    "  {\"id\": 2, \"frames\": [{\"module\":\"m\",\"offset\":1,\"symbol\":\"f}\"},\n"
    "                        {\"module\":\"m\",\"offset\":1,\"symbol\":\"f}x\"},\n"
    "                        {\"module\":\"m\",\"offset\":2,\"symbol\":null},\n"
    "                        {\"module\":\"m\", \"offset\":2,\"symbol\":null},\n"
    "                        {\"module\":\"m\",\"offset\":2,\"symbol\":\"g\"}]}]}\n";

static void test_frames_memoised_by_bytes(void **state)
{
    (void)state;
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot s;
    struct cli_error err;
    assert_int_equal(read_text(&ctx, memo, &s, &err), 0);
    assert_int_equal(s.nstacks, 2);
    const struct snap_stack *a = &s.stacks[0], *b = &s.stacks[1];
    assert_int_equal(a->nframes, 3);
    assert_int_equal(b->nframes, 5);
    assert_string_equal(ctx.frames[a->frames[0]].name, "m!f}");
    assert_string_equal(ctx.frames[a->frames[1]].name, "m+0x2");
    assert_int_equal(a->frames[1], a->frames[2]);
    assert_int_equal(b->frames[0], a->frames[0]);
    assert_string_equal(ctx.frames[b->frames[1]].name, "m!f}x");
    assert_int_equal(b->frames[2], a->frames[1]);
    assert_int_equal(b->frames[3], a->frames[1]); /* other bytes, same frame */
    assert_string_equal(ctx.frames[b->frames[4]].name, "m!g");
    snapshot_free(&s);
    /* A repeat cut short is still a truncated file. */
    char cut[] = "{\"format\": \"cumemtrace\", \"version\": 1, \"stacks\": [\n"
                 " {\"id\": 1, \"frames\": [{\"module\":\"m\",\"offset\":1}]},\n"
                 " {\"id\": 2, \"frames\": [{\"module\":\"m\",\"offset\":1";
    assert_int_equal(snapshot_read_mem(&ctx, "t.json", cut, strlen(cut), &s, &err),
                     CLI_ETRUNC);
    snapshot_ctx_free(&ctx);
}

/* Rows and groups as the library writes them are read by a fast lane
 * (json_lane.h); any other spelling by the general reading.  Both must
 * give the same model: the same document spelled both ways, and what one
 * spelling holds that the lane refuses, read in both places. */
static const char lane_doc[] =
    "{\"format\":\"cumemtrace\",\"version\":1,\n"
    "\"devices\":[{\"ordinal\":0,\"current_bytes\":12,\"peak_bytes\":12,\"peak_time_ns\":1,\n"
    "\"live\":[{\"stack\":2,\"kind\":\"async\",\"bytes\":5,\"count\":1},%s],\n"
    "\"churn\":[{\"stack\":2,\"allocs\":4,\"frees\":3,\"bytes_allocated\":20,\"temporary\":2}],\n"
    "\"at_peak\":[{\"stack\":2,\"bytes\":12,\"count\":2}]}],\n"
    "\"events\":{\"recorded\":4,\"columns\":[\"t_ns\",\"device\",\"kind\",\"delta\",\"stack\",\"current\"],\n"
    "\"data\":[[1,0,\"async\",9223372036854775807,2,18446744073709551615],%s,\n"
    "[3,-1,\"host-pinned\",-9223372036854775808,null,0],[4,0,\"vmm\",-5,2,0]]},\n"
    "\"stacks\":[{\"id\":2,\"frames\":[{\"marker\":\"m\"}]}]}\n";

static void read_lane_doc(struct snapctx *ctx, struct snapshot *s, const char *group,
                          const char *row)
{
    char text[2048];
    struct cli_error err;
    snprintf(text, sizeof text, lane_doc, group, row);
    int rc = read_text(ctx, text, s, &err);
    if (rc != 0)
        fail_msg("%s", err.msg);
}

static void test_fast_lanes_read_as_the_general_path(void **state)
{
    (void)state;
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    struct snapshot a, b;
    /* the lane's spelling, then the same values spelled so that it refuses
     * them (escapes in a key and in strings, spaces, a stack of null) */
    read_lane_doc(&ctx, &a, "{\"stack\":2,\"kind\":\"vmm\",\"bytes\":7,\"count\":3}",
                  "[2,0,\"device\",-7,2,70]");
    read_lane_doc(&ctx, &b,
                  "{ \"stack\" : 2 , \"kind\" : \"v\\u006dm\" , \"\\u0062ytes\" : 7, "
                  "\"count\":3 }",
                  "[ 2 , 0 , \"d\\u0065vice\" , -7 , 2 , 70 ]");
    assert_int_equal(a.events.n, 4);
    assert_int_equal(b.events.n, 4);
    for (size_t i = 0; i < 4; i++) {
        const struct snap_event *x = &a.events.v[i], *y = &b.events.v[i];
        assert_true(x->t_ns == y->t_ns && x->delta == y->delta && x->current == y->current);
        assert_true(x->stack_id == y->stack_id && x->device == y->device);
        assert_int_equal(x->kind, y->kind);
    }
    assert_true(a.events.v[0].delta == INT64_MAX && a.events.v[0].current == UINT64_MAX);
    assert_true(a.events.v[2].delta == INT64_MIN && a.events.v[2].stack_id == 0);
    assert_int_equal(a.events.v[2].kind, KIND_HOST_PINNED);
    assert_int_equal(a.events.v[2].device, -1);
    assert_int_equal(a.events.v[1].kind, KIND_DEVICE);
    const struct snap_device *da = &a.devices[0], *db = &b.devices[0];
    assert_int_equal(da->live.n, 2);
    assert_int_equal(db->live.n, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct snap_group *x = &da->live.v[i], *y = &db->live.v[i];
        assert_true(x->stack_id == y->stack_id && x->bytes == y->bytes &&
                    x->count == y->count && x->kind == y->kind);
    }
    assert_int_equal(da->live.v[1].kind, KIND_VMM);
    assert_true(da->live.v[1].bytes == 7 && da->live.v[1].count == 3);
    assert_true(da->churn.v[0].count == 4 && da->churn.v[0].frees == 3 &&
                da->churn.v[0].bytes == 20 && da->churn.v[0].temporary == 2);
    snapshot_free(&a);
    snapshot_free(&b);
    /* what the lane refuses is the general reading's to judge, with its
     * message: a duplicate key, a fraction, a device out of range */
    struct snapshot c;
    struct cli_error err;
    char text[2048];
    snprintf(text, sizeof text, lane_doc,
             "{\"stack\":2,\"bytes\":7,\"bytes\":8,\"count\":3}", "[2,0,\"device\",-7,2,70]");
    expect(read_text(&ctx, text, &c, &err), &err, CLI_EVALUE, "given twice");
    snprintf(text, sizeof text, lane_doc, "{\"stack\":2,\"bytes\":7,\"count\":3}",
             "[2,0,\"device\",-7.5,2,70]");
    expect(read_text(&ctx, text, &c, &err), &err, CLI_EVALUE, "is -7.5, expected an integer");
    snprintf(text, sizeof text, lane_doc, "{\"stack\":2,\"bytes\":7,\"count\":3}",
             "[2,-2,\"device\",-7,2,70]");
    expect(read_text(&ctx, text, &c, &err), &err, CLI_EVALUE, "not a device ordinal");
    snapshot_ctx_free(&ctx);
}

/* A view that reads no event rows (report, diff) gets the count, not the
 * rows; a bad row is still the same error. */
static void test_event_rows_counted_not_kept(void **state)
{
    (void)state;
    struct snapctx ctx;
    snapshot_ctx_init(&ctx);
    ctx.no_event_rows = true;
    struct snapshot s;
    struct cli_error err;
    assert_int_equal(read_text(&ctx, good, &s, &err), 0);
    assert_int_equal(s.events.n, 0);
    assert_int_equal(s.events.rows, 2);
    snapshot_free(&s);
    char text[sizeof good + 16];
    const char *at = strstr(good, "[6, 1, ");
    size_t k = (size_t)(at - good);
    memcpy(text, good, k);
    snprintf(text + k, sizeof text - k, "[6, \"x\", %s", at + 7);
    expect(read_text(&ctx, text, &s, &err), &err, CLI_ETYPE,
           "events.data[1][1] is a string, expected an integer");
    snapshot_ctx_free(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_error_classes),
        cmocka_unit_test(test_columns_reordered),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_frames_memoised_by_bytes),
        cmocka_unit_test(test_fast_lanes_read_as_the_general_path),
        cmocka_unit_test(test_event_rows_counted_not_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
