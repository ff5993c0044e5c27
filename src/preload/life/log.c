/* log.c - one-line diagnostics on stderr. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum log_level log_threshold = LOG_WARN;

void log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"error: ", "warning: ", "", "debug: "};
    char buf[1024];
    int saved = errno; /* the host must never see our errno */
    int n = snprintf(buf, sizeof buf, "cumemtrace: %s", tags[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
    errno = saved;
}

const char *log_abbrev(const char *s, char *buf, size_t n)
{
    size_t len = strlen(s);
    if (len < n)
        return s;
    char tail[40];
    int t = snprintf(tail, sizeof tail, "... (%zu bytes)", len);
    size_t head = n > (size_t)t + 1 ? n - (size_t)t - 1 : 0;
    snprintf(buf, n, "%.*s%s", (int)head, s, tail);
    return buf;
}
