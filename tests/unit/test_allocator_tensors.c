/* test_allocator_tensors.c - cumemtrace_allocator_tensors keeps JSON text
 * the writer copies into snapshots verbatim: whatever any caller in the
 * process hands it, what it keeps must be one well-formed JSON object of
 * known members, and each member is written back exactly as handed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocator_tensors.h"
#include "config.h"
#include "torch_protocol.h"

struct config config; /* the library's settings: all defaults (tracing on) */

/* The member as written, from the writer's buffer (never flushed: no fd). */
static const char *member(int device, int64_t tag, enum allocator_tensors_member m)
{
    static struct snapshot_json w;
    snapshot_json_init(&w, -1);
    allocator_tensors_write(device, tag, m, &w);
    w.buf[w.n] = '\0';
    return w.buf;
}

static int hand(int device, int64_t tag, const char *json)
{
    return cumemtrace_allocator_tensors(device, tag, json, json ? strlen(json) : 0);
}

static void well_formed_objects_are_kept_verbatim(void **state)
{
    (void)state;
    const char *t = "{\"tensors\": {\"groups\":[{\"site\":null,\"bytes\":1e3,"
                    "\"s\":\"caf\xc3\xa9 \\u00e9\\n\"}],\"more\":null} ,"
                    "\"growth\":[] }";
    assert_int_equal(hand(0, -1, t), 0);
    assert_string_equal(member(0, -1, ALLOCATOR_TENSORS),
                        "{\"groups\":[{\"site\":null,\"bytes\":1e3,"
                        "\"s\":\"caf\xc3\xa9 \\u00e9\\n\"}],\"more\":null}");
    assert_string_equal(member(0, -1, ALLOCATOR_GROWTH), "[]");
    assert_string_equal(member(0, -1, ALLOCATOR_PEAK_TENSORS), "null"); /* absent */
    assert_string_equal(member(1, -1, ALLOCATOR_TENSORS), "null");      /* another device */
    assert_string_equal(member(0, 3, ALLOCATOR_TENSORS), "null");       /* no OOM's */
    assert_int_equal(hand(0, 3, "{\"tensors\":{\"count\":3}}"), 0);
    assert_string_equal(member(0, 3, ALLOCATOR_TENSORS), "{\"count\":3}");
    assert_string_equal(member(0, -1, ALLOCATOR_GROWTH), "[]"); /* the state stands */
    /* an OOM's hand-over also names the failing request's autograd node */
    assert_int_equal(hand(0, 4, "{\"origin\":{\"thread\":\"backward\",\"node\":\"MmBackward0\","
                                "\"forward_site\":null}}"), 0);
    assert_string_equal(member(0, 4, ALLOCATOR_ORIGIN),
                        "{\"thread\":\"backward\",\"node\":\"MmBackward0\",\"forward_site\":null}");
    assert_string_equal(member(0, 4, ALLOCATOR_TENSORS), "null");
    assert_string_equal(member(0, 3, ALLOCATOR_ORIGIN), "null");
}

static void anything_else_is_refused_and_changes_nothing(void **state)
{
    (void)state;
    assert_int_equal(hand(2, -1, "{\"tensors\":1}"), 0);
    static const char *const bad[] = {
        "", "null", "[]", "{", "{\"tensors\":1", "{\"tensors\":1}x", "{\"tensors\":1}{}",
        "{\"other\":1}", "{\"tensors\":1,\"tensors\":2}", "{\"tensors\":01}",
        "{\"tensors\":1.}", "{\"tensors\":-}", "{\"tensors\":tru}", "{\"tensors\":\"a\nb\"}",
        "{\"tensors\":\"\\x\"}", "{\"tensors\":\"\\u12\"}", "{\"tensors\":\"\xff\"}",
        "{\"tensors\":\"\xc3\"}", "{\"tensors\":[1,]}", "{\"tensors\":{\"a\"}}",
        "{\"tensors\":{1:2}}", "{'tensors':1}", "{\"tensors\":\"a\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(hand(2, -1, bad[i]), -1);
        assert_string_equal(member(2, -1, ALLOCATOR_TENSORS), "1");
    }
    /* a NUL inside the text */
    assert_int_equal(cumemtrace_allocator_tensors(2, -1, "{\"tensors\":\"a\0\"}", 15), -1);
    assert_int_equal(hand(2, -1, NULL), -1);
    assert_int_equal(hand(-1, -1, "{}"), -1);
    assert_int_equal(hand(64, -1, "{}"), -1);
    assert_int_equal(hand(2, -2, "{}"), -1);
    assert_int_equal(cumemtrace_allocator_tensors(2, -1, "{}", TORCH_TENSORS_MAX + 1u), -1);
    assert_string_equal(member(2, -1, ALLOCATOR_TENSORS), "1");
}

static void nesting_is_bounded(void **state)
{
    (void)state;
    size_t n = 200;
    char *deep = malloc(2 * n + 32);
    strcpy(deep, "{\"tensors\":");
    size_t at = strlen(deep);
    for (size_t i = 0; i < n; i++)
        deep[at++] = '[';
    for (size_t i = 0; i < n; i++)
        deep[at++] = ']';
    strcpy(deep + at, "}");
    assert_false(allocator_tensors_check(deep, strlen(deep), NULL));
    assert_true(allocator_tensors_check("{\"tensors\":[[[[]]]]}", 20, NULL));
    free(deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(well_formed_objects_are_kept_verbatim),
        cmocka_unit_test(anything_else_is_refused_and_changes_nothing),
        cmocka_unit_test(nesting_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
