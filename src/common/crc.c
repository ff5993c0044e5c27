/* crc.c - CRC-32C for the stream's records.
 *
 * zlib's CRC-32 by table was two fifths of the background writer's CPU at
 * 160,000 events a second (the rows are 32 bytes each, all checksummed);
 * x86-64 computes CRC-32C in hardware since SSE4.2 (8 bytes an
 * instruction; the reason ext4's metadata and iSCSI chose it too).  The
 * software form reads eight bytes a step through eight tables ("slicing
 * by 8"), built once.
 */
#include "crc.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define POLY_C 0x82F63B78u

static uint32_t table_c[8][256];
static bool hardware;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill(uint32_t t[8][256], uint32_t poly)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? poly ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++)
            t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
}

static void init(void)
{
    fill(table_c, POLY_C);
#if defined(__x86_64__)
    unsigned a, b, c, d;
    hardware = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
#endif
}

static uint32_t sliced(uint32_t t[8][256], const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^
            t[4][lo >> 24] ^ t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    }
    for (; n > 0; p++, n--)
        c = t[0][(c ^ *p) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const unsigned char *p,
                                                                size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* unaligned; the instruction reads little-endian */
        c = __builtin_ia32_crc32di(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n > 0; p++, n--)
        c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

uint32_t crc32c(const void *p, size_t n)
{
    pthread_once(&once, init);
#if defined(__x86_64__)
    if (hardware)
        return crc32c_sse42(p, n);
#endif
    return sliced(table_c, p, n);
}

uint32_t crc32c_portable(const void *p, size_t n)
{
    pthread_once(&once, init);
    return sliced(table_c, p, n);
}
