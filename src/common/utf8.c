/* utf8.c - see utf8.h.  Table 3-7 of the Unicode standard lists, for each
 * lead byte, the range its second byte must lie in; every later byte is
 * 80..BF.  Checking the second byte's range is what rejects overlong
 * forms, surrogates and values past U+10FFFF without decoding first. */
#include "utf8.h"

size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    uint32_t v;
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2, v = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3, v = b & 0x0F;
        if (b == 0xE0)
            lo = 0xA0; /* below: overlong */
        else if (b == 0xED)
            hi = 0x9F; /* above: UTF-16 surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4, v = b & 0x07;
        if (b == 0xF0)
            lo = 0x90; /* below: overlong */
        else if (b == 0xF4)
            hi = 0x8F; /* above: past U+10FFFF */
    } else {
        return 0; /* 80..C1 (continuation, overlong lead) or F5..FF */
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if (i > 1 && (s[i] < 0x80 || s[i] > 0xBF))
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}
