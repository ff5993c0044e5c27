/* diff_main.c - the `cumemtrace diff` command: its options, then the
 * view of two files (diff.c) or of two directories of ranks
 * (ranks_diff.c, which prints its tables with diff.c's printers).  The
 * dispatch lives here, above both views, so neither calls the other back.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "diff.h"
#include "gate.h"
#include "holders.h"
#include "html.h"
#include "out.h"
#include "ranks.h"
#include "report.h"
#include "sites.h"
#include "units.h"

#define DIFF_TOP_DEFAULT 20

static const char usage[] =
    "usage: cumemtrace diff [--by stack|function|module|range] [--max-growth LIMIT]\n"
    "                       [--allow-oom] [--top N] [--bytes] [--html OUT]\n"
    "                       [--width N] [--full] [--segments] BASE NEW\n"
    "       cumemtrace diff [OPTIONS] BASE_DIR NEW_DIR\n"
    "\n"
    "Compares two snapshots: the peak per device (bytes, %, when), call sites\n"
    "at the peak sorted by the size of their change (NEW and GONE marked), what\n"
    "was live at exit, OOM counts and per-kind totals.  Call sites match across\n"
    "runs by Python file:line:function and native module!symbol, so a rebuild\n"
    "or ASLR does not break the match.  Directories (or a file and a directory)\n"
    "hold the ranks of a job: ranks match by rank number, then by host and\n"
    "local rank, and the gate applies to each rank's peak.\n"
    "In PyTorch processes the tables are PyTorch's tensors by the user's line\n"
    "(file:line:function): the peak's tensors, the live ones, and their growth\n"
    "(between two dumps of one run: a step's rate).\n"
    "\n"
    "  --by G            group call sites by the whole stack (default), the\n"
    "                    innermost function, or the innermost module; or\n"
    "                    compare the program's own ranges (NVTX, PyTorch's\n"
    "                    phases) at the peak instead, matched by path (of\n"
    "                    directories: stack, or range per rank)\n"
    "  --max-growth L    CI gate: exit 1 when a device's peak grew by more than\n"
    "                    L, a percentage (5%) or a size (512MiB), or when NEW\n"
    "                    ran out of memory more often than BASE (more OOM\n"
    "                    chains, or more that failed for good); else exit 0\n"
    "  --allow-oom       the gate judges peaks only: more OOMs do not fail it\n"
    "  --top N           changed call sites listed (default 20)\n"
    "  --bytes           print sizes as exact byte counts\n"
    "  --width N         lay out for N columns (default: the terminal's, 80 when\n"
    "                    piped)\n"
    "  --full            cut nothing: whole call-site names and caller chains\n"
    "  --html OUT        also write a page: differential flame graph (red grew,\n"
    "                    blue shrank) and both timelines on one time axis\n"
    "  --segments        the driver's call-site tables even where PyTorch's\n"
    "                    tensors are known (for PyTorch: which line created\n"
    "                    each cached segment)\n"
    "\n"
    "Exit status: 0 ok, 1 the gate failed, 2 usage or input error.\n"
    "\n"
    "example: cumemtrace diff yesterday.json today.json --max-growth 5%\n";

int diff_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"by", required_argument, NULL, 'y'},
        {"max-growth", required_argument, NULL, 'g'},
        {"allow-oom", no_argument, NULL, 'A'},
        {"top", required_argument, NULL, 't'},
        {"bytes", no_argument, NULL, 'b'},
        {"html", required_argument, NULL, 'H'},
        {"width", required_argument, NULL, 'w'},
        {"full", no_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *html = NULL;
    int by = BY_STACK;
    bool by_range = false;
    struct gate gate = {false, false, 0, NULL, false};
    bool allow_ooms = false;
    uint64_t top = DIFF_TOP_DEFAULT;
    bool exact = false;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'y':
            by_range = strcmp(optarg, "range") == 0;
            by = by_range ? BY_STACK : cli_parse_by(optarg);
            if (by < 0)
                return cli_usage("diff", "--by wants stack, function, module or range, "
                                 "not '%s'", optarg);
            break;
        case 'g': {
            int rc = gate_parse(optarg, &gate);
            if (rc == UNITS_ENOUNIT)
                return cli_usage("diff", "--max-growth needs a unit: %s%% for a percentage, "
                                 "%sMiB or %sB for a size, not '%s' (docs/units.md)",
                                 optarg, optarg, optarg, optarg);
            if (rc != 0)
                return cli_usage("diff", "--max-growth wants a percentage (5%%) or a "
                                 "size (512MiB), not '%s'", optarg);
            break;
        }
        case 't':
            if (cli_parse_count(optarg, &top) != 0 || top == 0 || top > 1000000)
                return cli_usage("diff", "--top wants a count from 1, not '%s'", optarg);
            break;
        case 'A': allow_ooms = true; break;
        case 'b': exact = true; break;
        case 'H': html = optarg; break;
        case 'w': {
            uint64_t w;
            if (cli_parse_count(optarg, &w) != 0 || w > 10000 || out_set_width((size_t)w) != 0)
                return cli_usage("diff", "--width wants columns from %d to 10000, not '%s'",
                                 OUT_WIDTH_MIN, optarg);
            break;
        }
        case 'F': out_set_width(OUT_WIDTH_FULL); break;
        case 'h': fputs(usage, stdout); return cli_finish_stdout();
        case ':': return cli_usage("diff", "%s needs a value", argv[optind - 1]);
        default: return cli_usage("diff", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (allow_ooms && !gate.on)
        return cli_usage("diff", "--allow-oom changes the gate of --max-growth, which is "
                         "not given");
    gate.allow_ooms = allow_ooms;
    if (argc - optind != 2)
        return cli_usage("diff", "wants two snapshot files, BASE and NEW (got %d)",
                         argc - optind);
    out_init(stdout, exact);
    if (ranks_any_dir(argv + optind, 2)) {
        if (by != BY_STACK)
            return cli_usage("diff", "--by %s compares two files; directories compare "
                             "whole stacks or (--by range) ranges",
                             by == BY_FUNCTION ? "function" : "module");
        if (html != NULL)
            return cli_usage("diff", "--html compares two files, not directories (for a "
                             "page of every rank: cumemtrace html DIR/*.json)");
        return ranks_diff_main(argv[optind], argv[optind + 1], &gate, (unsigned)top,
                               by_range);
    }
    struct cli_inputs in;
    /* the text reads no event rows; the page (--html) draws them */
    if ((html != NULL ? cli_load(&in, argv + optind, 2)
                      : cli_load_without_events(&in, argv + optind, 2)) != 0)
        return CLI_EXIT_ERROR;
    int rc = diff_text(stdout, in.snaps[0], in.snaps[1], (enum site_by)by, by_range,
                       (unsigned)top, &gate);
    if (rc >= 0 && html != NULL) {
        char title[256];
        html_title(title, sizeof title, in.snaps, 2, "diff");
        if (html_page_write(html, title, in.snaps, 2, "diff") != 0) {
            cli_inputs_free(&in);
            return CLI_EXIT_ERROR;
        }
    }
    cli_inputs_free(&in);
    if (rc < 0) {
        fprintf(stderr, "cumemtrace: diff: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    if (cli_finish_stdout() != 0)
        return CLI_EXIT_ERROR;
    return rc == 1 ? CLI_EXIT_GATE : CLI_EXIT_OK;
}
