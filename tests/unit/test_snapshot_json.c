/* test_snapshot_json.c - the snapshot's JSON emitter formats integers, hex and
 * strings by hand; every byte must be what the printf formats it replaced
 * (%llu, %lld, %02x, \u%04x) wrote, so snapshots stay byte-identical. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapshot_json.h"

/* What w wrote to its pipe, NUL-terminated in out (up to n bytes). */
static void drained(struct snapshot_json *w, int rfd, char *out, size_t n)
{
    snapshot_json_flush(w);
    ssize_t k = read(rfd, out, n - 1);
    out[k > 0 ? k : 0] = '\0';
}

static struct snapshot_json *open_writer(int p[2])
{
    assert_int_equal(pipe(p), 0);
    struct snapshot_json *w = malloc(sizeof *w);
    snapshot_json_init(w, p[1]);
    return w;
}

static void close_writer(struct snapshot_json *w, int p[2])
{
    close(p[0]);
    close(p[1]);
    free(w);
}

static void integers_are_printfs(void **state)
{
    (void)state;
    uint64_t u[] = {0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 4294967295u, 4294967296u,
                    1796125265107580538u, UINT64_MAX, UINT64_MAX - 1, 10000000000000000000u};
    int p[2];
    struct snapshot_json *w = open_writer(p);
    char got[128], want[128];
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        snapshot_json_u64(w, u[i]);
        drained(w, p[0], got, sizeof got);
        snprintf(want, sizeof want, "%llu", (unsigned long long)u[i]);
        assert_string_equal(got, want);
    }
    int64_t s[] = {0, -1, 1, INT64_MIN, INT64_MAX, -100, -99, 12345678901234};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        snapshot_json_i64(w, s[i]);
        drained(w, p[0], got, sizeof got);
        snprintf(want, sizeof want, "%lld", (long long)s[i]);
        assert_string_equal(got, want);
        snapshot_json_i64_or_null(w, s[i]);
        drained(w, p[0], got, sizeof got);
        if (s[i] < 0)
            assert_string_equal(got, "null");
        else
            assert_string_equal(got, want);
    }
    /* every value from 0 to 100000, and powers of ten around each boundary */
    for (uint64_t v = 0; v <= 100000; v++) {
        snapshot_json_u64(w, v);
        drained(w, p[0], got, sizeof got);
        snprintf(want, sizeof want, "%llu", (unsigned long long)v);
        assert_string_equal(got, want);
    }
    for (uint64_t t = 10; t != 0 && t <= UINT64_MAX / 10; t *= 10)
        for (uint64_t v = t - 2; v <= t + 2; v++) {
            snapshot_json_u64(w, v);
            drained(w, p[0], got, sizeof got);
            snprintf(want, sizeof want, "%llu", (unsigned long long)v);
            assert_string_equal(got, want);
        }
    close_writer(w, p);
}

static void hex_and_booleans(void **state)
{
    (void)state;
    int p[2];
    struct snapshot_json *w = open_writer(p);
    unsigned char id[256];
    char want[600], got[600];
    for (int i = 0; i < 256; i++) {
        id[i] = (unsigned char)i;
        snprintf(want + 2 * i, 3, "%02x", i);
    }
    snapshot_json_hex(w, id, 256);
    drained(w, p[0], got, sizeof got);
    assert_string_equal(got, want);
    snapshot_json_bool(w, true);
    snapshot_json_bool(w, false);
    drained(w, p[0], got, sizeof got);
    assert_string_equal(got, "truefalse");
    close_writer(w, p);
}

static void strings_escape_as_before(void **state)
{
    (void)state;
    int p[2];
    struct snapshot_json *w = open_writer(p);
    char got[256], want[256];
    for (int c = 1; c < 0x20; c++) {
        char s[4] = {'a', (char)c, 'b', 0};
        snapshot_json_str(w, s);
        drained(w, p[0], got, sizeof got);
        snprintf(want, sizeof want, "\"a\\u%04xb\"", c);
        assert_string_equal(got, want);
    }
    const struct {
        const char *in, *out;
    } cases[] = {
        {"", "\"\""},
        {"plain text", "\"plain text\""},
        {"q\"b\\e", "\"q\\\"b\\\\e\""},
        {"\x7f", "\"\x7f\""},
        {"caf\xc3\xa9", "\"caf\xc3\xa9\""},        /* well-formed UTF-8 as it is */
        {"a\xff" "b", "\"a\\ufffdb\""},            /* a byte that begins nothing */
        {"\xe2\x82", "\"\\ufffd\\ufffd\""},         /* a sequence cut short */
        {"\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snapshot_json_str(w, cases[i].in);
        drained(w, p[0], got, sizeof got);
        assert_string_equal(got, cases[i].out);
    }
    snapshot_json_str(w, NULL);
    drained(w, p[0], got, sizeof got);
    assert_string_equal(got, "null");
    close_writer(w, p);
}

/* Output larger than the buffer arrives whole and in order. */
static void long_output_is_whole(void **state)
{
    (void)state;
    char path[] = "/tmp/test_snapshot_json.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    struct snapshot_json *w = malloc(sizeof *w);
    snapshot_json_init(w, fd);
    for (uint64_t v = 0; v < 200000; v++) {
        snapshot_json_u64(w, v);
        snapshot_json_raw(w, ",", 1);
    }
    snapshot_json_flush(w);
    assert_int_equal(w->err, 0);
    FILE *f = fopen(path, "r");
    for (uint64_t v = 0; v < 200000; v++) {
        unsigned long long got;
        assert_int_equal(fscanf(f, "%llu,", &got), 1);
        assert_int_equal(got, v);
    }
    fclose(f);
    close(fd);
    unlink(path);
    free(w);
}

/* A number written when the buffer has less room than its digits (every
 * room from 0 to 24 bytes, every length of number) arrives whole: the
 * formatter writes straight into the buffer only when it fits. */
static void numbers_at_the_buffer_end(void **state)
{
    (void)state;
    char path[] = "/tmp/test_snapshot_json.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    struct snapshot_json *w = malloc(sizeof *w);
    static char fill[sizeof w->buf];
    memset(fill, 'x', sizeof fill);
    uint64_t v[] = {7, 42, 999999999, 4294967295u, 4294967296u, UINT64_MAX};
    char want[64], got[64];
    for (size_t room = 0; room <= 24; room++)
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            assert_int_equal(ftruncate(fd, 0), 0);
            assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
            snapshot_json_init(w, fd);
            snapshot_json_raw(w, fill, sizeof fill - room);
            snapshot_json_u64(w, v[i]);
            snapshot_json_raw(w, "|", 1);
            snapshot_json_flush(w);
            assert_int_equal(w->err, 0);
            int len = snprintf(want, sizeof want, "%llu|", (unsigned long long)v[i]);
            assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)(sizeof fill - room) + len);
            assert_int_equal(pread(fd, got, (size_t)len, (off_t)(sizeof fill - room)), len);
            got[len] = '\0';
            assert_string_equal(got, want);
        }
    close(fd);
    unlink(path);
    free(w);
}

/* A write error stops the output and is kept. */
static void write_error_is_kept(void **state)
{
    (void)state;
    struct snapshot_json *w = malloc(sizeof *w);
    snapshot_json_init(w, -1);
    snapshot_json_s(w, "x");
    snapshot_json_flush(w);
    assert_int_not_equal(w->err, 0);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integers_are_printfs),
        cmocka_unit_test(hex_and_booleans),
        cmocka_unit_test(strings_escape_as_before),
        cmocka_unit_test(long_output_is_whole),
        cmocka_unit_test(numbers_at_the_buffer_end),
        cmocka_unit_test(write_error_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
