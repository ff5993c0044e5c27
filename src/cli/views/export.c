/* export.c - `cumemtrace export --format F FILE -o OUT`: a snapshot in the
 * format another viewer reads.  One writer per format (export_*.c). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "outfile.h"
#include "export.h"

static const char usage[] =
    "usage: cumemtrace export --format speedscope|memory_viz|pprof [-o OUT]\n"
    "                         [--segments] FILE\n"
    "\n"
    "Writes the snapshot for another viewer:\n"
    "  speedscope   speedscope's JSON file format (www.speedscope.app): one\n"
    "               sampled profile in bytes per device and moment - at the\n"
    "               peak, live at the dump, and at the OOM of a post-mortem;\n"
    "               in a PyTorch process PyTorch's tensor groups (whole\n"
    "               stacks) and its cache, as flamegraph draws them\n"
    "  memory_viz   PyTorch's memory-snapshot pickle, for pytorch.org/memory_viz\n"
    "               and torch.cuda._memory_viz: every allocation a segment,\n"
    "               the event log as its trace (addresses are synthetic)\n"
    "  pprof        gzipped profile.proto for pprof -top/-http/-diff_base:\n"
    "               inuse_space (at the peak), inuse_space_exit, alloc_space,\n"
    "               alloc_objects per stack (in a PyTorch process, inuse: its\n"
    "               tensor groups and cache)\n"
    "\n"
    "  -f, --format F     the format (required)\n"
    "  -o, --output OUT   the file to write (default: stdout)\n"
    "  --segments         speedscope, pprof: the driver's allocations even where\n"
    "                     PyTorch's tensors are known\n"
    "\n"
    "example: cumemtrace export --format speedscope run.json -o run.speedscope.json\n";

int export_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *format = NULL, *outp = "-";
    int c;
    while ((c = getopt_long(argc, argv, ":hf:o:", opts, NULL)) != -1) {
        switch (c) {
        case 'f': format = optarg; break;
        case 'o': outp = optarg; break;
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("export", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("export", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (format == NULL)
        return cli_usage("export", "needs --format speedscope, memory_viz or pprof");
    bool memviz = strcmp(format, "memory_viz") == 0, pprof = strcmp(format, "pprof") == 0;
    if (!memviz && !pprof && strcmp(format, "speedscope") != 0)
        return cli_usage("export", "--format wants speedscope, memory_viz or pprof, not '%s'",
                         format);
    if (argc - optind != 1)
        return cli_usage("export", "wants one snapshot file (got %d)", argc - optind);
    struct cli_inputs in;
    if (cli_load(&in, argv + optind, 1) != 0)
        return CLI_EXIT_ERROR;
    struct outfile of;
    struct cli_error err = {0, ""};
    if (outfile_open(&of, "export", outp, true, &err) != 0) {
        errors_print(&err);
        cli_inputs_free(&in);
        return CLI_EXIT_ERROR;
    }
    FILE *f = of.f;
    int rc = memviz ? export_memviz(f, in.snaps[0], &err)
             : pprof ? export_pprof(f, in.snaps[0], &err)
                     : export_speedscope(f, in.snaps[0]);
    cli_inputs_free(&in);
    if (rc != 0) {
        if (memviz || pprof)
            errors_print(&err);
        else
            fprintf(stderr, "cumemtrace: export: out of memory\n");
        outfile_abort(&of); /* nothing half-written is left to be mistaken for a result */
        return CLI_EXIT_ERROR;
    }
    if (of.f == stdout)
        return cli_finish_stdout();
    if (outfile_commit(&of, "export", &err) != 0) {
        errors_print(&err);
        return CLI_EXIT_ERROR;
    }
    return CLI_EXIT_OK;
}
