/* esc.c - see esc.h. */
#include "esc.h"

#include <string.h>

#include "utf8.h"

bool esc_unsafe(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C ||
           cp == 0x200E || cp == 0x200F || (cp >= 0x2028 && cp <= 0x202E) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/* Length of the sequence at s (left bytes) and whether it must be escaped. */
static size_t scan(const unsigned char *s, size_t left, bool *unsafe)
{
    uint32_t cp;
    size_t k = utf8_decode(s, left, &cp);
    if (k == 0) {
        *unsafe = true;
        return 1;
    }
    *unsafe = esc_unsafe(cp);
    return k;
}

bool esc_clean(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (left > 0) {
        /* Printable ASCII, the common case, without decoding. */
        if (*p >= 0x20 && *p < 0x7F) {
            p++, left--;
            continue;
        }
        bool unsafe;
        size_t k = scan(p, left, &unsafe);
        if (unsafe)
            return false;
        p += k, left -= k;
    }
    return true;
}

size_t esc_text(const char *s, char *out)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s), n = 0;
    while (left > 0) {
        bool unsafe;
        size_t k = scan(p, left, &unsafe);
        for (size_t i = 0; i < k; i++) {
            if (unsafe) {
                out[n++] = '\\';
                out[n++] = 'x';
                out[n++] = hex[p[i] >> 4];
                out[n++] = hex[p[i] & 15];
            } else {
                out[n++] = (char)p[i];
            }
        }
        p += k, left -= k;
    }
    out[n] = '\0';
    return n;
}
