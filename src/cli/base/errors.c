/* errors.c - see errors.h. */
#include "errors.h"

#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "esc.h"

struct entry {
    int code;
    const char *hint;
};

static const struct entry table[] = {
#define XX(n, h) {CLI_E##n, h},
    CLI_ERRNO_MAP(XX)
#undef XX
};

int errors_set(struct cli_error *err, int code, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* Messages quote file names and recorded strings: whatever they hold,
     * the line reaches the terminal escaped (esc.h). */
    if (!esc_clean(err->msg)) {
        char tmp[ESC_ROOM(sizeof err->msg)];
        size_t n = esc_text(err->msg, tmp);
        if (n >= sizeof err->msg) { /* cut, at a character boundary */
            n = sizeof err->msg - 1;
            while (n > 0 && ((unsigned char)tmp[n] & 0xC0) == 0x80)
                n--;
        }
        memcpy(err->msg, tmp, n);
        err->msg[n] = '\0';
    }
    return code;
}

void errors_line(const char *prefix, const char *fmt, ...)
{
    char text[2048], out[ESC_ROOM(sizeof text)];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0)
        text[0] = '\0';
    esc_text(text, out);
    fprintf(stderr, "%s%s\n", prefix, out);
}

/* The table's hint for a CLI_E* code; NULL when it has none. */
static const char *errors_hint(int code)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return table[i].hint;
    return NULL;
}

void errors_print(const struct cli_error *err)
{
    const char *hint = errors_hint(err->code);
    if (hint != NULL)
        fprintf(stderr, "cumemtrace: %s (%s)\n", err->msg, hint);
    else
        fprintf(stderr, "cumemtrace: %s\n", err->msg);
}

const char *errors_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a file";
    }
}
