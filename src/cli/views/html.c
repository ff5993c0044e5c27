/* html.c - `cumemtrace html FILE... [-o OUT]`: the interactive page (html.h). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "html.h"

static const char usage[] =
    "usage: cumemtrace html [-o OUT] FILE...\n"
    "\n"
    "Writes one self-contained HTML page (no network, opens from file://):\n"
    "memory over time by call site, a flame graph of what was held at the\n"
    "peak (or live at exit, or at the OOM), a sortable call-site table and,\n"
    "for an OOM dump, the post-mortem.  Several files (one per rank) share\n"
    "one page with a process picker.\n"
    "\n"
    "  -o, --output OUT   the page (default cumemtrace.html; - for stdout)\n"
    "\n"
    "example: cumemtrace html cumemtrace.python.4242.oom.0.json -o oom.html\n";

int html_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *outp = "cumemtrace.html";
    int c;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': outp = optarg; break;
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("html", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("html", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind < 1)
        return cli_usage("html", "wants at least one snapshot file");
    struct cli_inputs in;
    if (cli_load(&in, argv + optind, (size_t)(argc - optind)) != 0)
        return CLI_EXIT_ERROR;
    char title[256];
    html_title(title, sizeof title, in.snaps, in.n, "report");
    int rc = html_page_write(outp, title, in.snaps, in.n, "report");
    cli_inputs_free(&in);
    if (rc != 0)
        return CLI_EXIT_ERROR;
    if (strcmp(outp, "-") != 0)
        errors_line("cumemtrace: ", "wrote %s (open it in a browser)", outp);
    return CLI_EXIT_OK;
}
