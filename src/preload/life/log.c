/* log.c - one-line diagnostics on stderr. */
#include "log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "esc.h"

enum log_level log_threshold = LOG_WARN;

void log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"error: ", "warning: ", "", "debug: ", ""};
    bool shown = level == LOG_NOTE ? log_threshold >= LOG_WARN : level <= log_threshold;
    if (!shown)
        return;
    char text[1024];
    /* paths and names in it (an exe's, a file's) may hold escape sequences:
     * they reach the terminal as \xNN (esc.h) */
    char buf[ESC_ROOM(sizeof text) + 32];
    int saved = errno; /* the host must never see our errno */
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (m < 0)
        text[0] = '\0';
    int n = snprintf(buf, sizeof buf, "cumemtrace: %s", tags[level]);
    size_t len = (size_t)n + esc_text(text, buf + n);
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
