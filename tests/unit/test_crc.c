/* test_crc.c - the stream's checksums: the published check values, and
 * every length and alignment against a bit-at-a-time reference (the
 * instruction's path and the tables' alike). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crc.h"

static uint32_t bitwise(uint32_t poly, const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? poly ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

static void check_values_are_the_published_ones(void **state)
{
    (void)state;
    /* the "check" of the CRC's catalogue entry (CRC-32/ISCSI) */
    assert_int_equal(crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c_portable("123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c("", 0), 0);
}

static void every_length_and_alignment_agrees_with_the_reference(void **state)
{
    (void)state;
    unsigned char buf[1100];
    srand(7);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)rand();
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += n < 64 ? 1 : 37) {
            uint32_t c = bitwise(0x82F63B78u, buf + off, n);
            assert_int_equal(crc32c(buf + off, n), c);
            assert_int_equal(crc32c_portable(buf + off, n), c);
        }
}

static void one_flipped_bit_changes_it(void **state)
{
    (void)state;
    unsigned char row[32] = {1, 2, 3};
    uint32_t c = crc32c(row, sizeof row);
    for (int bit = 0; bit < 256; bit++) {
        row[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        assert_int_not_equal(crc32c(row, sizeof row), c);
        row[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(check_values_are_the_published_ones),
        cmocka_unit_test(every_length_and_alignment_agrees_with_the_reference),
        cmocka_unit_test(one_flipped_bit_changes_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
