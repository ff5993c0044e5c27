/* errors.h - every error the command-line tool reports, in one table.
 *
 * Functions return 0 or a negative CLI_E* code, and fill a struct cli_error
 * with the specific line to print.  The table gives each code its name and
 * the hint that ends the message, so wording stays consistent:
 * "cumemtrace: <what failed>: <cause> (<hint>)".
 */
#ifndef CUMEMTRACE_CLI_ERRORS_H
#define CUMEMTRACE_CLI_ERRORS_H

/* XX(name, hint-or-NULL) */
#define CLI_ERRNO_MAP(XX)                                                          \
    XX(USAGE, "see 'cumemtrace --help'")                                           \
    XX(NOENT, "check the path")                                                    \
    XX(IO, NULL)                                                                   \
    XX(NOTJSON, "is this a cumemtrace snapshot?")                                  \
    XX(TRUNC, "was the process killed while writing?")                             \
    XX(FOREIGN, "cumemtrace reads the JSON files its library writes")              \
    XX(VERSION, "upgrade cumemtrace to read it")                                   \
    XX(TYPE, "the file does not follow docs/snapshot-format.md")                   \
    XX(VALUE, "the file does not follow docs/snapshot-format.md")                  \
    XX(BADREF, "the file does not follow docs/snapshot-format.md")                 \
    XX(INVARIANT, "the file contradicts itself: edited, or not written by libcumemtrace") \
    XX(NOMEM, NULL)                                                                \
    XX(NOOOM, "use --at peak or --at live")                                        \
    XX(NOLIB, "set CUMEMTRACE_LIB, or install cumemtrace (pip or make install)")   \
    XX(EXEC, NULL)                                                                 \
    XX(WRITE, NULL)

enum {
    CLI_OK = 0,
#define XX(name, hint) CLI_E##name,
    CLI_ERR_FIRST_ = -100,
    CLI_ERRNO_MAP(XX)
#undef XX
    CLI_ERR_LAST_
};

/* The message of the last failure: one line, without the "cumemtrace: "
 * prefix and the hint (errors_print adds both). */
struct cli_error {
    int code;
    char msg[512];
};

/* Stores code and the formatted message in err (if not NULL); returns
 * code so that callers can write `return errors_set(err, ...)`. */
int errors_set(struct cli_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "a FIFO", "a character device", "a directory"...: the kind of a file
 * mode (st_mode) that is not a regular file's, for messages. */
const char *errors_file_kind(unsigned mode);

/* Prints prefix and the formatted line on stderr, the line escaped (esc.h:
 * it quotes file names and recorded strings) - the notes that are not
 * errors ("cumemtrace: wrote x.html", run's list of files).  Lines longer
 * than 2 KiB are cut. */
void errors_line(const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "cumemtrace: <msg> (<hint>)" on one line to stderr. */
void errors_print(const struct cli_error *err);

#endif
