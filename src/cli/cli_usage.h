/* cli_usage.h - the exit codes and the one-line usage error every subcommand
 * prints (cli_usage.c); below cli.c, so option parsers that need nothing else
 * of cli.h (frame_filter.c) do not depend on the snapshot loaders. */
#ifndef CUMEMTRACE_CLI_CLI_USAGE_H
#define CUMEMTRACE_CLI_CLI_USAGE_H

#define CLI_EXIT_OK 0
#define CLI_EXIT_GATE 1
#define CLI_EXIT_ERROR 2

/* Prints "cumemtrace: <cmd>: <message> (see 'cumemtrace <cmd> --help')" to
 * stderr (cmd may be NULL) and returns CLI_EXIT_ERROR, for
 * `return cli_usage(...)`. */
int cli_usage(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
