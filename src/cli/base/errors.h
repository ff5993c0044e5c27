/* errors.h - every error the command-line tool reports, in one table.
 *
 * Functions return 0 or a negative CLI_E* code, and fill a struct cli_error
 * with the specific line to print.  The table gives each code its name (for
 * tests and --json), a generic text and the hint that ends the message, so
 * wording stays consistent: "cumemtrace: <what failed>: <cause> (<hint>)".
 */
#ifndef CUMEMTRACE_CLI_ERRORS_H
#define CUMEMTRACE_CLI_ERRORS_H

/* XX(name, text, hint-or-NULL) */
#define CLI_ERRNO_MAP(XX)                                                      \
    XX(USAGE, "invalid usage", "see 'cumemtrace --help'")                      \
    XX(NOENT, "file not found", "check the path")                              \
    XX(IO, "input/output error", NULL)                                         \
    XX(NOTJSON, "not JSON", "is this a cumemtrace snapshot?")                  \
    XX(TRUNC, "file truncated", "was the process killed while writing?")       \
    XX(FOREIGN, "not a cumemtrace snapshot",                                   \
       "cumemtrace reads the JSON files its library writes")                   \
    XX(VERSION, "snapshot format too new", "upgrade cumemtrace to read it")    \
    XX(TYPE, "field of the wrong type",                                        \
       "the file does not follow docs/snapshot-format.md")                     \
    XX(VALUE, "invalid value",                                                 \
       "the file does not follow docs/snapshot-format.md")                     \
    XX(BADREF, "unknown stack id",                                             \
       "the file does not follow docs/snapshot-format.md")                     \
    XX(INVARIANT, "contradictory snapshot",                                    \
       "the file contradicts itself: edited, or not written by libcumemtrace") \
    XX(NOMEM, "out of memory", NULL)                                           \
    XX(NOOOM, "not an OOM post-mortem", "use --at peak or --at live")          \
    XX(NOLIB, "libcumemtrace.so not found",                                    \
       "set CUMEMTRACE_LIB, or install cumemtrace (pip or make install)")      \
    XX(EXEC, "cannot run the command", NULL)                                   \
    XX(WRITE, "cannot write output", NULL)

enum {
    CLI_OK = 0,
#define XX(name, text, hint) CLI_E##name,
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
