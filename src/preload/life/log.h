/* log.h - the library's only voice: one-line messages on stderr, prefixed
 * "cumemtrace: ", filtered by CUMEMTRACE_LOG (error, warn, info, debug). */
#ifndef CUMEMTRACE_LOG_H
#define CUMEMTRACE_LOG_H

#include <stddef.h>

/* LOG_NOTE: what the user asked for happened (a file written, a retry
 * recovered), untagged: shown unless CUMEMTRACE_LOG=error.  The others
 * are shown at their level and below. */
enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG, LOG_NOTE };

extern enum log_level log_threshold;

/* Formats and writes one line with a single write(2), if `level` is shown:
 * no stdio locks, safe in any hook.  Messages longer than 1 KiB are
 * truncated; control characters and the like in them are written as \xNN
 * (esc.h). */
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* `s` for quoting in a message: itself when it fits in n bytes, else its
 * head, "..." and its length, so the message keeps its advice. */
const char *log_abbrev(const char *s, char *buf, size_t n);

#define log_enabled(level) ((level) <= log_threshold)
#define LOG(level, ...)                      \
    do {                                     \
        if (log_enabled(level))              \
            log_msg((level), __VA_ARGS__);   \
    } while (0)

#endif
