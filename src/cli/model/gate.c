/* gate.c - see gate.h. */
#include "gate.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

/* "5%", "2.5%", "0%": 0 and the value in millionths, -1 when malformed. */
static int parse_percent(const char *s, uint64_t *out)
{
    uint64_t whole = 0, frac = 0, scale = PCT_SCALE;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9') {
        if (whole > 1000000000)
            return -1;
        whole = whole * 10 + (uint64_t)(*p++ - '0');
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9') {
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*p - '0') * scale;
            }
            p++;
        }
    }
    if (p[0] != '%' || p[1] != '\0')
        return -1;
    *out = whole * PCT_SCALE + frac;
    return 0;
}

/* A bare number is refused by units_parse_size (UNITS_ENOUNIT): the caller
 * says which unit to add. */
int gate_parse(const char *s, struct gate *g)
{
    g->on = true;
    g->text = s;
    size_t n = strlen(s);
    if (n > 0 && s[n - 1] == '%') {
        g->percent = true;
        return parse_percent(s, &g->value);
    }
    g->percent = false;
    return units_parse_size(s, &g->value);
}

bool gate_fails(const struct gate *g, uint64_t base, uint64_t new_peak)
{
    if (new_peak <= base)
        return false;
    uint64_t growth = new_peak - base;
    if (!g->percent)
        return growth > g->value;
    /* growth / base > value / (100 * PCT_SCALE) */
    unsigned __int128 lhs = (unsigned __int128)growth * 100u * PCT_SCALE;
    unsigned __int128 rhs = (unsigned __int128)g->value * base;
    return lhs > rhs;
}

bool gate_ooms_fail(const struct gate *g, struct gate_ooms base, struct gate_ooms now,
                    char *why, size_t n)
{
    if (!g->on || g->allow_ooms || (now.chains <= base.chains && now.failed <= base.failed))
        return false;
    snprintf(why, n, "OOMs %" PRIu64 " -> %" PRIu64 " (failed for good %" PRIu64 " -> %" PRIu64
             "): NEW ran out of memory more often than BASE (--allow-oom to judge peaks "
             "only)",
             base.chains, now.chains, base.failed, now.failed);
    return true;
}
