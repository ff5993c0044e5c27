/* test_cli_json.c - the CLI's JSON pull parser (src/cli/read/json.c): grammar,
 * exact 64-bit integers, truncated vs not-JSON, error positions. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "json_lane.h"

struct doc {
    char *buf;
    struct arena arena;
    struct json_cursor c;
};

/* The parser wants a writable buffer with a NUL after the last byte. */
static struct json_cursor *open_doc(struct doc *d, const char *text)
{
    size_t n = strlen(text);
    d->buf = malloc(n + 1);
    memcpy(d->buf, text, n + 1);
    arena_init(&d->arena);
    json_init(&d->c, d->buf, n, &d->arena, true);
    return &d->c;
}

static void close_doc(struct doc *d)
{
    free(d->buf);
    arena_free(&d->arena);
}

/* Validates a whole document as the snapshot reader's first pass does. */
static int validate(const char *text, size_t *err_offset)
{
    struct doc d;
    struct json_cursor *c = open_doc(&d, text);
    int rc = json_skip(c);
    if (rc == JSON_OK)
        rc = json_finish(c);
    if (err_offset)
        *err_offset = c->err_offset;
    close_doc(&d);
    return rc;
}

static void test_valid_documents(void **state)
{
    (void)state;
    const char *ok[] = {
        "{}", "[]", "0", "-0", "1.5e-3", "\"\"", "true", "false", "null",
        " {\"a\" : [1, 2, {\"b\": null}], \"c\": \"\\u00e9\\ud83d\\ude00\"} \n",
        "[[[[[]]]]]", "\xef\xbb\xbf{}", "\"tab\\tquote\\\"slash\\/\"",
        "123456789012345678901234567890", /* valid JSON, just too big for ints */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(validate(ok[i], NULL), JSON_OK);
}

static void test_truncated_vs_syntax(void **state)
{
    (void)state;
    /* The input ends inside a value: truncated. */
    const char *cut[] = {"", "  ", "{", "{\"a\"", "{\"a\":", "{\"a\":1", "[1,", "\"abc",
                         "\"ab\\", "\"\\u12", "tru", "-", "1.", "1e", "{\"a\":[1,2",
                         "\"\\ud83d"};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        size_t off;
        int rc = validate(cut[i], &off);
        if (rc != JSON_ETRUNC)
            fail_msg("'%s': expected truncated, got %d", cut[i], rc);
        assert_int_equal(off, strlen(cut[i]));
    }
    /* Anything else that is not JSON: syntax, at the offending byte. */
    struct {
        const char *text;
        size_t offset;
    } bad[] = {
        {"hello", 0}, {"{a:1}", 1}, {"[1,]", 3}, {"[1 2]", 3}, {"01", 1},
        {"{\"a\" 1}", 5}, {"\"a\nb\"", 2}, {"\"\\x\"", 1}, {"tx", 0}, {"{} {}", 3},
        {"[1,,2]", 3}, {"\"\\udc00\"", 1}, {"1.e5", 2}, {"+1", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t off;
        int rc = validate(bad[i].text, &off);
        if (rc != JSON_ESYNTAX)
            fail_msg("'%s': expected syntax error, got %d", bad[i].text, rc);
        if (off != bad[i].offset)
            fail_msg("'%s': error at %zu, expected %zu", bad[i].text, off, bad[i].offset);
    }
    /* A NUL byte inside the file is not the end of the input. */
    char nul[] = "[1,\0 2]";
    struct arena a;
    arena_init(&a);
    struct json_cursor c;
    json_init(&c, nul, sizeof nul - 1, &a, true);
    assert_int_equal(json_skip(&c), JSON_ESYNTAX);
    arena_free(&a);
}

static void test_depth_limit(void **state)
{
    (void)state;
    size_t n = JSON_MAX_DEPTH + 1;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    assert_int_equal(validate(deep, NULL), JSON_EDEPTH);
    deep[n - 1] = ' '; /* exactly the limit */
    deep[n] = ' ';
    assert_int_equal(validate(deep, NULL), JSON_OK);
    free(deep);
}

static void test_integers_exact(void **state)
{
    (void)state;
    struct doc d;
    struct json_cursor *c =
        open_doc(&d, "[18446744073709551615, 9007199254740993, -9223372036854775808, "
                     "9223372036854775807, 18446744073709551616, -1, 1.0, 2e3, 7]");
    uint64_t u;
    int64_t i;
    assert_int_equal(json_enter_array(c), JSON_OK);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_uint64(c, &u), JSON_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_uint64(c, &u), JSON_OK);
    assert_true(u == 9007199254740993ULL); /* 2^53 + 1: a double would round */
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_int64(c, &i), JSON_OK);
    assert_true(i == INT64_MIN);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_int64(c, &i), JSON_OK);
    assert_true(i == INT64_MAX);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_uint64(c, &u), JSON_ERANGE); /* 2^64 */
    assert_int_equal(json_skip(c), JSON_OK);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_uint64(c, &u), JSON_ERANGE); /* negative */
    assert_int_equal(json_get_int64(c, &i), JSON_OK);
    assert_true(i == -1);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_int64(c, &i), JSON_ERANGE); /* 1.0 is not an integer */
    assert_int_equal(json_skip(c), JSON_OK);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_uint64(c, &u), JSON_ERANGE); /* nor is 2e3 */
    assert_int_equal(json_skip(c), JSON_OK);
    assert_int_equal(json_next_element(c), 1);
    assert_int_equal(json_get_string(c, NULL, NULL), JSON_ETYPE); /* not sticky */
    assert_int_equal(json_get_uint64(c, &u), JSON_OK);
    assert_true(u == 7);
    assert_int_equal(json_next_element(c), 0);
    assert_int_equal(json_finish(c), JSON_OK);
    close_doc(&d);
}

static void test_strings_and_objects(void **state)
{
    (void)state;
    struct doc d;
    struct json_cursor *c = open_doc(
        &d, "{\"plain\": \"abc\", \"esc\": \"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\", "
            "\"skip\": {\"x\": [1, {\"y\": \"z\"}]}, \"t\": true, \"n\": null}");
    const char *key, *s;
    size_t klen, slen;
    bool b;
    assert_int_equal(json_enter_object(c), JSON_OK);
    assert_int_equal(json_next_member(c, &key, &klen), 1);
    assert_string_equal(key, "plain");
    assert_int_equal(klen, 5);
    assert_int_equal(json_get_string(c, &s, &slen), JSON_OK);
    assert_string_equal(s, "abc");
    assert_ptr_not_equal(s, NULL);
    assert_true(s > d.buf && s < d.buf + strlen("{\"plain\": \"abc")); /* in place */
    assert_int_equal(json_next_member(c, &key, NULL), 1);
    assert_string_equal(key, "esc");
    assert_int_equal(json_get_string(c, &s, &slen), JSON_OK);
    assert_string_equal(s, "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
    assert_int_equal(slen, 6 + 2 + 4);
    assert_int_equal(json_next_member(c, &key, NULL), 1);
    assert_string_equal(key, "skip");
    assert_int_equal(json_skip(c), JSON_OK);
    assert_int_equal(json_next_member(c, &key, NULL), 1);
    assert_int_equal(json_get_bool(c, &b), JSON_OK);
    assert_true(b);
    assert_int_equal(json_next_member(c, &key, NULL), 1);
    assert_int_equal(json_peek(c), JSON_NULL);
    assert_int_equal(json_get_null(c), JSON_OK);
    assert_int_equal(json_next_member(c, &key, NULL), 0);
    assert_int_equal(json_finish(c), JSON_OK);
    close_doc(&d);
}

static void test_error_position(void **state)
{
    (void)state;
    struct doc d;
    struct json_cursor *c = open_doc(&d, "{\n  \"a\": 1,\n  \"b\": x\n}");
    assert_int_equal(json_skip(c), JSON_ESYNTAX);
    unsigned long line, col;
    json_line_col(c->buf, c->err_offset, &line, &col);
    assert_int_equal(line, 3);
    assert_int_equal(col, 8);
    assert_non_null(strstr(c->err_msg, "'x'"));
    /* Sticky: later calls report the same failure. */
    assert_int_equal(json_peek(c), JSON_INVALID);
    assert_int_equal(json_skip(c), JSON_ESYNTAX);
    close_doc(&d);
}

static void test_copy_mode_leaves_buffer(void **state)
{
    (void)state;
    struct doc d;
    const char *text = "{\"format\": \"cumemtrace\", \"version\": 1}";
    struct arena a;
    arena_init(&a);
    d.buf = strdup(text);
    json_init(&d.c, d.buf, strlen(text), &a, false);
    const char *key, *s;
    assert_int_equal(json_enter_object(&d.c), JSON_OK);
    assert_int_equal(json_next_member(&d.c, &key, NULL), 1);
    assert_int_equal(json_get_string(&d.c, &s, NULL), JSON_OK);
    assert_string_equal(s, "cumemtrace");
    assert_int_equal(json_next_member(&d.c, &key, NULL), 1);
    assert_string_equal(key, "version");
    assert_int_equal(json_skip(&d.c), JSON_OK);
    assert_int_equal(json_next_member(&d.c, &key, NULL), 0);
    assert_string_equal(d.buf, text); /* nothing written */
    free(d.buf);
    arena_free(&a);
}

/* ---- the fast lane (json_lane.h): whatever it accepts, the ordinary
 * reading accepts with the same value; it refuses the rest ---- */

/* The reference: a plain integer by the grammar, converted by strtoull. */
static int plain_u64(const char *p, uint64_t *v, const char **stop)
{
    const char *q = p;
    if (*q == '0') {
        q++;
    } else if (*q >= '1' && *q <= '9') {
        while (*q >= '0' && *q <= '9')
            q++;
    } else {
        return 0;
    }
    if (*q == '.' || *q == 'e' || *q == 'E' || (*q >= '0' && *q <= '9'))
        return 0;
    if (q - p > 20)
        return 0;
    char tmp[32];
    memcpy(tmp, p, (size_t)(q - p));
    tmp[q - p] = '\0';
    errno = 0;
    unsigned long long x = strtoull(tmp, NULL, 10);
    if (errno == ERANGE)
        return 0;
    *v = x;
    *stop = q;
    return 1;
}

static void test_lane_integers(void **state)
{
    (void)state;
    const char *nums[] = {
        "0", "7", "10", "99999999", "100000000", "1234567890123", "9223372036854775807",
        "9223372036854775808", "18446744073709551615", "18446744073709551616",
        "00", "01", "1.5", "1e3", "2E9", "-1", "", "x", "1234567812345678123",
        "12345678123456781234",
    };
    const char *tails[] = {",", "]", "}", " ", "\n", ".5", "e1", "5", "", "\"x\"........."};
    srand(25);
    for (int round = 0; round < 20000; round++) {
        char text[96];
        if (round < 200) {
            snprintf(text, sizeof text, "%s%s", nums[round % 20], tails[round / 20]);
        } else { /* random digits, then any byte */
            int n = 1 + rand() % 22, i = 0;
            for (; i < n; i++)
                text[i] = (char)('0' + rand() % 10);
            text[i++] = (char)(rand() % 256);
            text[i] = '\0';
        }
        size_t len = strlen(text);
        char buf[128];
        memset(buf, 0, sizeof buf);
        memcpy(buf, text, len + 1);
        uint64_t want = 0, got = 0;
        const char *stop = NULL;
        int ok = plain_u64(buf, &want, &stop);
        const char *q = lane_u64(buf, buf + len, &got);
        if (q != NULL) { /* never more than the grammar and the range allow */
            assert_true(ok);
            assert_true(got == want);
            assert_ptr_equal(q, stop);
        } else if (ok && stop - buf > 1 && len - (size_t)(stop - buf) >= 8 &&
                   stop - buf <= 19) {
            fail_msg("the lane refused a plain integer with room after it: '%s'", text);
        }
        /* the check without the value: a plain integer of <= 18 digits */
        const char *ck = lane_int_syntax(buf, buf + len, false);
        if (ck != NULL) {
            assert_true(ok);
            assert_ptr_equal(ck, stop);
            assert_true(stop - buf <= 18);
        } else if (ok && len - (size_t)(stop - buf) >= 8 && stop - buf <= 18) {
            fail_msg("the check refused a plain integer with room after it: '%s'", text);
        }
        /* signed: the lane agrees with json_get_int64's ordinary answer */
        char neg[130];
        snprintf(neg, sizeof neg, "-%s", buf);
        int64_t si = 0;
        q = lane_i64(neg, neg + strlen(neg), &si);
        if (q != NULL) {
            assert_true(ok);
            assert_true(want <= (uint64_t)INT64_MAX + 1);
            assert_true(si == (want == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)want));
        }
    }
    /* within 8 bytes of the end it leaves the number to the ordinary path */
    char tail[16] = "123"; /* zeros after it */
    uint64_t v = 0;
    assert_null(lane_u64(tail, tail + 3, &v));
    assert_non_null(lane_u64(tail, tail + 11, &v)); /* the same with 8 more bytes */
    assert_true(v == 123);
}

static void test_lane_strings(void **state)
{
    (void)state;
    srand(26);
    const char alphabet[] = "ab\"\\\x01\x7f\xc3\xa9 }";
    for (int round = 0; round < 20000; round++) {
        char buf[64];
        memset(buf, 0, sizeof buf);
        buf[0] = '"';
        int n = 1 + rand() % 40;
        for (int i = 1; i <= n; i++)
            buf[i] = alphabet[rand() % (sizeof alphabet - 1)];
        const char *end = buf + strlen(buf);
        const char *s = NULL;
        size_t len = 0;
        const char *q = lane_span(buf, end, &s, &len);
        /* the reference: the bytes up to the first quote, none of them a
         * backslash or a control character */
        const char *r = buf + 1;
        while (r < end && *r != '"' && *r != '\\' && (unsigned char)*r >= 0x20)
            r++;
        if (r < end && *r == '"') {
            assert_non_null(q);
            assert_ptr_equal(s, buf + 1);
            assert_int_equal(len, (size_t)(r - buf - 1));
            assert_ptr_equal(q, r + 1);
        } else {
            assert_null(q);
        }
    }
}

static void test_lane_object_hash(void **state)
{
    (void)state;
    char a[] = "{\"module\":\"python\",\"file\":\"/srv/m.py\",\"line\":12,\"function\":\"f\"},{";
    char b[sizeof a];
    memcpy(b, a, sizeof a);
    uint64_t ha, hb;
    size_t na = lane_object_hash(a, a + strlen(a), &ha);
    size_t nb = lane_object_hash(b, b + strlen(b), &hb);
    assert_int_equal(na, (size_t)(strchr(a, '}') - a + 1));
    assert_int_equal(na, nb);
    assert_true(ha == hb); /* the same bytes elsewhere: the same hash */
    /* a change in any one byte of the object (but the braces) changes it */
    for (size_t i = 1; i + 1 < na; i++) {
        b[i] ^= 0x40;
        uint64_t h;
        if (lane_object_hash(b, b + strlen(b), &h) == na)
            assert_true(h != ha);
        b[i] ^= 0x40;
    }
    for (size_t n = 2; n < 12; n++) { /* short objects too */
        char c[16] = "{abcdefghijk";
        c[n - 1] = '}';
        uint64_t h;
        assert_int_equal(lane_object_hash(c, c + n, &h), n);
    }
    assert_int_equal(lane_object_hash(a + 1, a + strlen(a), &ha), 0); /* no '{' */
    char open[16] = "{\"a\":1"; /* (room past it: the search stops at end) */
    assert_int_equal(lane_object_hash(open, open + strlen(open), &ha), 0); /* no '}' */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_documents),
        cmocka_unit_test(test_truncated_vs_syntax),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_integers_exact),
        cmocka_unit_test(test_strings_and_objects),
        cmocka_unit_test(test_error_position),
        cmocka_unit_test(test_copy_mode_leaves_buffer),
        cmocka_unit_test(test_lane_integers),
        cmocka_unit_test(test_lane_strings),
        cmocka_unit_test(test_lane_object_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
