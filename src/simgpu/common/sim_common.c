/* sim_common.c - environment, messages and fault rules for the simulated device. */
#include "sim_common.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "units.h"

const char *sim_common_getenv(const char *name)
{
    return secure_getenv(name);
}

uint64_t sim_common_env_size(const char *speaker, const char *name,
                             uint64_t dflt, uint64_t min, uint64_t max)
{
    const char *s = sim_common_getenv(name);
    uint64_t v;
    if (s == NULL)
        return dflt;
    if (units_parse_size(s, &v) != 0) {
        sim_common_say(speaker, "ignoring %s='%s': expected a size like 24GiB", name, s);
        return dflt;
    }
    if (v < min || v > max) {
        char lo[32], hi[32];
        sim_common_say(speaker, "ignoring %s='%s': expected a size from %s to %s", name, s,
                       units_format_bytes(min, lo, sizeof lo),
                       units_format_bytes(max, hi, sizeof hi));
        return dflt;
    }
    return v;
}

long sim_common_env_long(const char *speaker, const char *name, long dflt,
                         long min, long max)
{
    const char *s = sim_common_getenv(name);
    char *end;
    if (s == NULL)
        return dflt;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < min || v > max) {
        sim_common_say(speaker, "ignoring %s='%s': expected a number from %ld to %ld",
                       name, s, min, max);
        return dflt;
    }
    return v;
}

int sim_common_env_flag(const char *name)
{
    const char *s = sim_common_getenv(name);
    return s != NULL && *s != '\0' && strcmp(s, "0") != 0;
}

void sim_common_say(const char *speaker, const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line - 1, "%s: ", speaker);
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - 1 - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* truncated: still one whole line */
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nothing sensible to do when stderr is gone */
}

int sim_common_grow(void *items, size_t n, size_t *cap, size_t size, size_t first)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : first;
    void *old;
    memcpy(&old, items, sizeof old); /* items is a T **: no void ** conversion in C */
    void *grown = realloc(old, c * size);
    if (grown == NULL)
        return -1;
    memcpy(items, &grown, sizeof grown);
    *cap = c;
    return 0;
}

/* ---- SIMCUDA_FAIL ---- */

static int is_runtime_name(const char *name, size_t len)
{
    return len >= 4 && strncmp(name, "cuda", 4) == 0;
}

static int find_name(const char *name, size_t len, const char *const *names, int nnames)
{
    for (int i = 0; i < nnames; i++)
        if (strlen(names[i]) == len && strncmp(names[i], name, len) == 0)
            return i;
    return -1;
}

/* Parses "N", "N+", "N=CODE" or "N+=CODE" (after the colon) into r. */
static int parse_count(const char *s, const char *end, struct sim_fault_rule *r)
{
    char buf[64];
    size_t len = (size_t)(end - s);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';

    char *p = buf, *q;
    if (!isdigit((unsigned char)*p))
        return -1;
    errno = 0;
    unsigned long n = strtoul(p, &q, 10);
    if (errno != 0 || n == 0)
        return -1;
    r->n = n;
    r->from_on = 0;
    r->code = 0;
    if (*q == '+') {
        r->from_on = 1;
        q++;
    }
    if (*q == '=') {
        p = q + 1;
        if (!isdigit((unsigned char)*p))
            return -1;
        errno = 0;
        long code = strtol(p, &q, 10);
        /* 0 would "fail" with success and skip the call: never what a test means. */
        if (errno != 0 || code <= 0 || code > 0x7fffffff)
            return -1;
        r->code = code;
    }
    return *q == '\0' ? 0 : -1;
}

void sim_common_fault_parse(struct sim_fault_set *set, const char *spec,
                            const char *speaker, int runtime_side,
                            const char *const *names, int nnames)
{
    set->count = 0;
    if (spec == NULL)
        return;
    const char *p = spec;
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        p = *end == ',' ? end + 1 : end;
        if (a == b)
            continue;

        const char *colon = memchr(a, ':', (size_t)(b - a));
        size_t nlen = colon ? (size_t)(colon - a) : (size_t)(b - a);
        if (is_runtime_name(a, nlen) != runtime_side)
            continue; /* the other library's entry: it judges it */
        int len = (int)(b - a);
        struct sim_fault_rule r;
        if (colon == NULL || nlen == 0 || parse_count(colon + 1, b, &r) != 0) {
            sim_common_say(speaker, "ignoring SIMCUDA_FAIL entry '%.*s': expected "
                           "symbol:N, symbol:N+ or symbol:N=CODE", len, a);
            continue;
        }
        r.sym = find_name(a, nlen, names, nnames);
        if (r.sym < 0) {
            sim_common_say(speaker, "ignoring SIMCUDA_FAIL entry '%.*s': '%.*s' is not a "
                           "function this library can fail", len, a, (int)nlen, a);
            continue;
        }
        if (set->count == SIM_FAULT_MAX) {
            sim_common_say(speaker, "ignoring SIMCUDA_FAIL entry '%.*s': more than %d rules",
                           len, a, SIM_FAULT_MAX);
            continue;
        }
        set->rule[set->count++] = r;
    }
}

int sim_common_fault_hit(const struct sim_fault_set *set, int sym,
                         unsigned long count, long *code)
{
    for (int i = 0; i < set->count; i++) {
        const struct sim_fault_rule *r = &set->rule[i];
        if (r->sym != sym)
            continue;
        if (count == r->n || (r->from_on && count > r->n)) {
            *code = r->code;
            return 1;
        }
    }
    return 0;
}
