/* units.c - parse and print byte sizes. */
#include "units.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct unit {
    const char *name;
    double factor;
};

static const struct unit units[] = {
    {"b", 1.0},
    {"k", 1024.0},
    {"kib", 1024.0},
    {"kb", 1e3},
    {"m", 1048576.0},
    {"mib", 1048576.0},
    {"mb", 1e6},
    {"g", 1073741824.0},
    {"gib", 1073741824.0},
    {"gb", 1e9},
    {"t", 1099511627776.0},
    {"tib", 1099511627776.0},
    {"tb", 1e12},
};

int units_parse_size(const char *s, uint64_t *out)
{
    if (s == NULL)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s) && *s != '.')
        return -1;

    /* Integer part parsed exactly so that "17179869184" stays exact. */
    uint64_t whole = 0;
    int digits = 0;
    while (isdigit((unsigned char)*s)) {
        unsigned d = (unsigned)(*s - '0');
        if (whole > (UINT64_MAX - d) / 10)
            return -1;
        whole = whole * 10 + d;
        s++;
        digits++;
    }
    double frac = 0.0, scale = 0.1;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s) && digits == 0)
            return -1;
        while (isdigit((unsigned char)*s)) {
            frac += (*s - '0') * scale;
            scale /= 10;
            s++;
        }
    }
    while (isspace((unsigned char)*s))
        s++;
    const char *u = s;
    size_t ulen = 0;
    while (isalpha((unsigned char)u[ulen]))
        ulen++;
    const char *rest = u + ulen;
    while (isspace((unsigned char)*rest))
        rest++;
    if (*rest != '\0' || ulen > 3)
        return -1;
    if (ulen == 0)
        return UNITS_ENOUNIT;

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].name) != ulen || strncasecmp(units[i].name, u, ulen) != 0)
            continue;
        double f = units[i].factor;
        if (f == 1.0) {
            if (frac != 0.0)
                return -1; /* a fraction of a byte is meaningless */
            *out = whole;
            return 0;
        }
        double v = ((double)whole + frac) * f;
        if (!(v < 18446744073709551616.0))
            return -1;
        *out = (uint64_t)(v + 0.5);
        return 0;
    }
    return -1;
}

char *units_format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024.0 && i < 5) {
        v /= 1024.0;
        i++;
    }
    if (v >= 100.0)
        snprintf(buf, len, "%.0f %s", v, names[i]);
    else if (v >= 10.0)
        snprintf(buf, len, "%.1f %s", v, names[i]);
    else
        snprintf(buf, len, "%.2f %s", v, names[i]);
    return buf;
}
