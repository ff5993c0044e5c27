/* cli_usage.c - the usage error every subcommand prints (cli_usage.h). */
#include "cli_usage.h"

#include <stdarg.h>
#include <stdio.h>

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cumemtrace: ", stderr);
    if (cmd != NULL)
        fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'cumemtrace %s%s--help')\n", cmd ? cmd : "", cmd ? " " : "");
    return CLI_EXIT_ERROR;
}
